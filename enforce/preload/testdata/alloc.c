/*
 * alloc.c — the preload tier's test program, linked against the fake
 * libcuda.so.1. Usage: alloc MODE SIZE...
 *   MODE direct   calls cuMemAlloc_v2 by name (the symbol LD_PRELOAD interposes)
 *        procaddr resolves "cuMemAlloc" through cuGetProcAddress_v2, as the CUDA runtime does
 *        dlsym    dlopens libcuda.so.1 and dlsyms cuMemAlloc_v2 from that handle
 * SIZE in bytes allocates; "pause" waits for a line on stdin; -N frees the N-th allocation (from 1). Each step
 * prints "alloc BYTES rc RC" or "free N rc RC"; at the end "driver BYTES",
 * what the (fake) driver holds, and "info FREE TOTAL" from cuMemGetInfo_v2.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuGetProcAddress_v2(const char *, void **, int, unsigned long long, int *);
unsigned long long fakecuda_used(void);

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: alloc direct|procaddr|dlsym SIZE...\n");
		return 2;
	}
	alloc_fn alloc = cuMemAlloc_v2;
	free_fn release = cuMemFree_v2;
	if (!strcmp(argv[1], "procaddr")) {
		void *a = NULL, *f = NULL;
		int st;
		if (cuGetProcAddress_v2("cuMemAlloc", &a, 12000, 0, &st) || cuGetProcAddress_v2("cuMemFree", &f, 12000, 0, &st))
			return 3;
		alloc = (alloc_fn)a;
		release = (free_fn)f;
	} else if (!strcmp(argv[1], "dlsym")) {
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return 4;
		alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
		release = (free_fn)dlsym(h, "cuMemFree_v2");
	}
	CUdeviceptr ptrs[64] = {0};
	int n = 0;
	for (int i = 2; i < argc && n < 64; i++) {
		if (!strcmp(argv[i], "pause")) { /* hold until a line or EOF on stdin */
			printf("paused\n");
			fflush(stdout);
			for (int c = getchar(); c != EOF && c != '\n'; c = getchar())
				;
			continue;
		}
		long long v = atoll(argv[i]);
		if (v < 0) {
			printf("free %lld rc %d\n", -v, release(ptrs[-v - 1]));
			continue;
		}
		CUresult rc = alloc(&ptrs[n++], (size_t)v);
		printf("alloc %lld rc %d\n", v, rc);
		fflush(stdout);
	}
	size_t free_ = 0, total = 0;
	cuMemGetInfo_v2(&free_, &total);
	printf("driver %llu\ninfo %zu %zu\n", fakecuda_used(), free_, total);
	return 0;
}
