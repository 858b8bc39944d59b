//go:build whisper

// C side of the cgo the Go bindings lack: trampolines that carry whisper.cpp's
// callbacks to Go (user data is a runtime/cgo.Handle), the abort flag, and the
// one-time ggml backend registration.

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <ggml.h>
#include <ggml-backend.h>
#include <whisper.h>

#include "_cgo_export.h"

// Debian's ggml registers no backend until ggml_backend_load_all() runs (it is
// built with GGML_BACKEND_DL); loading a model before that aborts the process.
// The registry is process-wide, so is the once. Where ggml was unpacked into a
// private prefix (make deps' bundle route), its backend modules are not in the
// directory compiled into libggml: WSCHED_GGML_BACKEND_DIR names them.
static pthread_once_t backends_once = PTHREAD_ONCE_INIT;

static void load_backends_once(void) {
#ifdef WSCHED_GGML_BACKEND_DIR
	ggml_backend_load_all_from_path(WSCHED_GGML_BACKEND_DIR);
#else
	ggml_backend_load_all();
#endif
}

void wsched_load_backends(void) { pthread_once(&backends_once, load_backends_once); }

// call_tag names the Go call this thread is running whisper.cpp for (0: none):
// the wrappers below set it around each blocking call, so a log line reaches
// the call that caused it even when several calls run at once. Lines from
// other threads (ggml's worker threads) arrive untagged.
static __thread uintptr_t call_tag;

static void log_cb(enum ggml_log_level level, const char *text, void *user_data) {
	wschedLogText((int)level, (char *)text, (uintptr_t)user_data, call_tag);
}

// whisper_log_set also routes ggml's lines; ggml_log_set is called first so the
// lines of ggml_backend_load_all arrive too. Both are process-wide.
void wsched_log_install(uintptr_t handle) {
	ggml_log_set(log_cb, (void *)handle);
	whisper_log_set(log_cb, (void *)handle);
}

static void segment_cb(struct whisper_context *ctx, struct whisper_state *state, int n_new, void *user_data) {
	(void)ctx;
	(void)state;
	wschedSegment(n_new, (uintptr_t)user_data);
}

static void progress_cb(struct whisper_context *ctx, struct whisper_state *state, int progress, void *user_data) {
	(void)ctx;
	(void)state;
	wschedProgress(progress, (uintptr_t)user_data);
}

// The abort flag is plain C memory that Go sets once; the callbacks below only
// read it, so cancellation costs no call into Go.
static bool abort_cb(void *flag) { return __atomic_load_n((int *)flag, __ATOMIC_RELAXED) != 0; }

static bool encoder_begin_cb(struct whisper_context *ctx, struct whisper_state *state, void *flag) {
	(void)ctx;
	(void)state;
	return !abort_cb(flag);
}

int *wsched_flag_new(void) { return calloc(1, sizeof(int)); }

void wsched_flag_set(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELAXED); }

// wsched_set_callbacks replaces every callback whisper_full_default_params may
// have set: progress and segments go to the Go run behind handle; whisper.cpp
// checks abort after each encoder and decoder graph, encoder_begin before each
// 30 s window.
void wsched_set_callbacks(struct whisper_full_params *p, uintptr_t handle, int *flag) {
	p->new_segment_callback = segment_cb;
	p->new_segment_callback_user_data = (void *)handle;
	p->progress_callback = progress_cb;
	p->progress_callback_user_data = (void *)handle;
	p->encoder_begin_callback = encoder_begin_cb;
	p->encoder_begin_callback_user_data = flag;
	p->abort_callback = abort_cb;
	p->abort_callback_user_data = flag;
}

// Parameters live in C memory (see fullParams in cgo.go). Like cgo's C.malloc,
// it never returns NULL.
struct whisper_full_params *wsched_params_new(enum whisper_sampling_strategy strategy) {
	struct whisper_full_params *p = malloc(sizeof *p);
	if (p == NULL) {
		abort();
	}
	*p = whisper_full_default_params(strategy);
	return p;
}

// wsched_init_context loads a model, with its default state or (no_state)
// weights only.
struct whisper_context *wsched_init_context(const char *path, struct whisper_context_params cp, bool no_state, uintptr_t tag) {
	call_tag = tag;
	struct whisper_context *ctx = no_state ? whisper_init_from_file_with_params_no_state(path, cp)
	                                       : whisper_init_from_file_with_params(path, cp);
	call_tag = 0;
	return ctx;
}

// wsched_init_state allocates one decoding state (KV caches, compute
// buffers) on ctx's weights; NULL when whisper.cpp could not.
struct whisper_state *wsched_init_state(struct whisper_context *ctx, uintptr_t tag) {
	call_tag = tag;
	struct whisper_state *st = whisper_init_state(ctx);
	call_tag = 0;
	return st;
}

// wsched_full runs whisper_full_with_state on st, or whisper_full on the
// context's default state when st is NULL (VAD lives only there in 1.9).
int wsched_full(struct whisper_context *ctx, struct whisper_state *st, const struct whisper_full_params *p, const float *samples, int n, uintptr_t tag) {
	call_tag = tag;
	int status = st == NULL ? whisper_full(ctx, *p, samples, n) : whisper_full_with_state(ctx, st, *p, samples, n);
	call_tag = 0;
	return status;
}
