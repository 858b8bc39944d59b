/*
 * alloc.c — the preload tier's test program, linked against the fake
 * libcuda.so.1. Usage: alloc MODE SIZE...
 *   MODE direct   calls cuMemAlloc_v2 by name (the symbol LD_PRELOAD interposes)
 *        procaddr resolves "cuMemAlloc" through cuGetProcAddress_v2, as the CUDA runtime does
 *        dlsym    dlopens libcuda.so.1 and dlsyms cuMemAlloc_v2 from that handle
 *        bench=N  N pairs of cuMemAlloc_v2 + cuMemFree_v2 (4 KiB); prints "ns PER-PAIR"
 *        entry=NAME  calls the allocation entry point NAME (cuMemAllocManaged,
 *                 cuMemCreate, …) as the program's own symbol, freeing with its match
 * SIZE in bytes allocates; "pause" waits for a line on stdin; -N frees the N-th allocation (from 1). Each step
 * prints "alloc BYTES rc RC" or "free N rc RC"; at the end "driver BYTES",
 * what the (fake) driver holds, and "info FREE TOTAL" from cuMemGetInfo_v2.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <stdint.h>
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

static const char *entry; /* mode entry=NAME */

/* by_entry allocates n bytes through entry, with its own signature. */
static CUresult by_entry(CUdeviceptr *p, size_t n) {
	void *f = dlsym(RTLD_DEFAULT, entry);
	unsigned int p1 = 0, pitch1;
	size_t pitch;
	CUresult rc = 999;
	if (!f)
		return rc;
	if (!strcmp(entry, "cuMemAlloc")) {
		rc = ((CUresult(*)(unsigned int *, unsigned int))f)(&p1, (unsigned int)n);
		*p = p1;
	} else if (!strcmp(entry, "cuMemAllocManaged")) {
		rc = ((CUresult(*)(CUdeviceptr *, size_t, unsigned int))f)(p, n, 1);
	} else if (!strcmp(entry, "cuMemAllocPitch_v2")) {
		rc = ((CUresult(*)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int))f)(p, &pitch, n, 1, 4);
	} else if (!strcmp(entry, "cuMemAllocPitch")) {
		rc = ((CUresult(*)(unsigned int *, unsigned int *, unsigned int, unsigned int, unsigned int))f)(&p1, &pitch1, (unsigned int)n, 1, 4);
		*p = p1;
	} else if (!strncmp(entry, "cuMemAllocAsync", 15)) {
		rc = ((CUresult(*)(CUdeviceptr *, size_t, void *))f)(p, n, NULL);
	} else if (!strncmp(entry, "cuMemAllocFromPoolAsync", 23)) {
		rc = ((CUresult(*)(CUdeviceptr *, size_t, void *, void *))f)(p, n, NULL, NULL);
	} else if (!strncmp(entry, "cuArrayCreate", 13)) {
		/* n one-byte elements in one row (CU_AD_FORMAT_UNSIGNED_INT8, 1 channel) */
		if (!strcmp(entry, "cuArrayCreate")) {
			struct { unsigned w, h; int f; unsigned c; } d = {(unsigned)n, 1, 1, 1};
			rc = ((CUresult(*)(void **, const void *))f)((void **)p, &d);
		} else {
			struct { size_t w, h; int f; unsigned c; } d = {n, 1, 1, 1};
			rc = ((CUresult(*)(void **, const void *))f)((void **)p, &d);
		}
	} else if (!strncmp(entry, "cuArray3DCreate", 15)) {
		/* n/4 × 2 × 2 one-byte elements (n a multiple of 4) */
		if (!strcmp(entry, "cuArray3DCreate")) {
			struct { unsigned w, h, d; int f; unsigned c, fl; } d = {(unsigned)n / 4, 2, 2, 1, 1, 0};
			rc = ((CUresult(*)(void **, const void *))f)((void **)p, &d);
		} else {
			struct { size_t w, h, d; int f; unsigned c, fl; } d = {n / 4, 2, 2, 1, 1, 0};
			rc = ((CUresult(*)(void **, const void *))f)((void **)p, &d);
		}
	} else if (!strcmp(entry, "cuMipmappedArrayCreate")) {
		/* one level: n one-byte elements */
		struct { size_t w, h, d; int f; unsigned c, fl; } d = {n, 0, 0, 1, 1, 0};
		rc = ((CUresult(*)(void **, const void *, unsigned))f)((void **)p, &d, 1);
	} else if (!strcmp(entry, "cuMemCreate")) {
		rc = ((CUresult(*)(unsigned long long *, size_t, const void *, unsigned long long))f)(p, n, NULL, 0);
	} else {
		rc = ((CUresult(*)(CUdeviceptr *, size_t))f)(p, n);
	}
	return rc;
}

/* by_entry_free frees what by_entry allocated, with the matching call. */
static CUresult by_entry_free(CUdeviceptr p) {
	const char *name = "cuMemFree_v2";
	if (!strcmp(entry, "cuMemCreate"))
		name = "cuMemRelease";
	else if (strstr(entry, "Array"))
		name = !strcmp(entry, "cuMipmappedArrayCreate") ? "cuMipmappedArrayDestroy" : "cuArrayDestroy";
	else if (strstr(entry, "Async"))
		name = strstr(entry, "_ptsz") ? "cuMemFreeAsync_ptsz" : "cuMemFreeAsync";
	else if (!strcmp(entry, "cuMemAlloc") || !strcmp(entry, "cuMemAllocPitch"))
		name = "cuMemFree";
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f)
		return 999;
	if (strstr(name, "Destroy"))
		return ((CUresult(*)(void *))f)((void *)(uintptr_t)p);
	if (strstr(name, "Async"))
		return ((CUresult(*)(CUdeviceptr, void *))f)(p, NULL);
	if (!strcmp(name, "cuMemFree"))
		return ((CUresult(*)(unsigned int))f)((unsigned int)p);
	return ((CUresult(*)(CUdeviceptr))f)(p);
}

int main(int argc, char **argv) {
	if (argc < 2) {
		fprintf(stderr, "usage: alloc direct|procaddr|dlsym SIZE...\n");
		return 2;
	}
	if (!strncmp(argv[1], "bench=", 6)) {
		long n = atol(argv[1] + 6);
		struct timespec a, b;
		CUdeviceptr p;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < n; i++)
			if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p))
				return 5;
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("ns %.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / (double)n);
		return 0;
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
	} else if (!strncmp(argv[1], "entry=", 6)) {
		entry = argv[1] + 6;
		alloc = by_entry;
		release = by_entry_free;
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
