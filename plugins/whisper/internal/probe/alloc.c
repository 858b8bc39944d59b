//go:build whisper

// Records every large posix_memalign the process makes. ggml's CPU buffers (model weights, KV caches,
// compute buffers) come from ggml_aligned_malloc -> posix_memalign in libggml-base, so this sees the
// exact byte count behind each size whisper.cpp prints rounded to 0.01 MB, and the buffers it does not
// print at all (the KV cache whisper_full recreates for beam search / best-of).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc.h"

static int (*real_posix_memalign)(void **, size_t, size_t);
static size_t probe_sizes[PROBE_MAX_ALLOCS];
static int probe_phases[PROBE_MAX_ALLOCS];
static int probe_count;
static int probe_phase;

int posix_memalign(void **ptr, size_t alignment, size_t size) {
	if (real_posix_memalign == NULL) {
		real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
	}
	int rc = real_posix_memalign(ptr, alignment, size);
	if (rc == 0 && size >= PROBE_MIN_ALLOC) {
		int i = __atomic_fetch_add(&probe_count, 1, __ATOMIC_SEQ_CST);
		if (i < PROBE_MAX_ALLOCS) {
			probe_sizes[i] = size;
			probe_phases[i] = __atomic_load_n(&probe_phase, __ATOMIC_SEQ_CST);
		}
	}
	return rc;
}

void probe_set_phase(int phase) { __atomic_store_n(&probe_phase, phase, __ATOMIC_SEQ_CST); }

int probe_alloc_count(void) {
	int n = __atomic_load_n(&probe_count, __ATOMIC_SEQ_CST);
	return n < PROBE_MAX_ALLOCS ? n : PROBE_MAX_ALLOCS;
}

size_t probe_alloc_size(int i) { return probe_sizes[i]; }
int probe_alloc_phase(int i) { return probe_phases[i]; }
