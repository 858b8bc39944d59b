//go:build whisper

#include <stdint.h>

#include <ggml.h>
#include <whisper.h>

#include "_cgo_export.h"

static void probe_log_cb(enum ggml_log_level level, const char *text, void *user_data) {
	probeLogText((int)level, (char *)text, (uintptr_t)user_data);
}

// Routes whisper.cpp's and ggml's log lines to Go. whisper_log_set also installs the callback for ggml
// (whisper_backend_init_gpu calls ggml_log_set with it); ggml_log_set is called here as well so the
// lines ggml_backend_load_all prints before any model is loaded arrive too.
void probe_install_log(uintptr_t handle) {
	ggml_log_set(probe_log_cb, (void *)handle);
	whisper_log_set(probe_log_cb, (void *)handle);
}

// NULL restores the defaults (print to stderr).
void probe_restore_log(void) {
	ggml_log_set(NULL, NULL);
	whisper_log_set(NULL, NULL);
}
