/*
 * fakecuda.c — a fake libcuda.so.1 for the preload tier's tests (no GPU).
 *
 * It exports the driver's allocation entry points and cuGetProcAddress(_v2);
 * "device memory" is an address counter (nothing is mapped) and the bytes the
 * process holds, which fakecuda_used() reports. An allocation past
 * FAKECUDA_TOTAL_BYTES (default 80 GiB) fails as a real driver's would.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;

#define OK 0
#define OOM 2
#define NOT_FOUND 500

#define SLOTS 65536
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long next_addr = 0x10000, used;
static struct {
	unsigned long long addr;
	size_t bytes;
} slots[SLOTS];

static size_t total(void) {
	const char *v = getenv("FAKECUDA_TOTAL_BYTES");
	return v ? strtoull(v, NULL, 10) : 80ULL << 30;
}

static CUresult take(unsigned long long *out, size_t n) {
	pthread_mutex_lock(&mu);
	if (used + n > total()) {
		pthread_mutex_unlock(&mu);
		return OOM;
	}
	for (int i = 0; i < SLOTS; i++) {
		if (!slots[i].addr) {
			slots[i].addr = next_addr;
			slots[i].bytes = n;
			*out = next_addr;
			next_addr += 0x1000; /* small, so that v1 pointers fit in 32 bits */
			used += n;
			pthread_mutex_unlock(&mu);
			return OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return OOM;
}

static CUresult give(unsigned long long addr) {
	pthread_mutex_lock(&mu);
	for (int i = 0; i < SLOTS; i++) {
		if (slots[i].addr == addr) {
			used -= slots[i].bytes;
			slots[i].addr = 0;
			pthread_mutex_unlock(&mu);
			return OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return 1; /* CUDA_ERROR_INVALID_VALUE */
}

unsigned long long fakecuda_used(void) {
	pthread_mutex_lock(&mu);
	unsigned long long u = used;
	pthread_mutex_unlock(&mu);
	return u;
}

CUresult cuInit(unsigned int flags) { (void)flags; return OK; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
CUresult cuDeviceGet(int *d, int ordinal) { *d = ordinal; return OK; }
CUresult cuCtxCreate_v2(void **ctx, unsigned int flags, int dev) { (void)flags, (void)dev; *ctx = (void *)1; return OK; }
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return take(p, n); }
CUresult cuMemAlloc(CUdeviceptr_v1 *p, unsigned int n) {
	unsigned long long a;
	CUresult rc = take(&a, n);
	if (rc == OK)
		*p = (CUdeviceptr_v1)a;
	return rc;
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { (void)f; return take(p, n); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e) {
	(void)e;
	*pitch = (w + 511) & ~(size_t)511;
	return take(p, *pitch * h);
}
CUresult cuMemAllocPitch(CUdeviceptr_v1 *p, unsigned int *pitch, unsigned int w, unsigned int h, unsigned int e) {
	(void)e;
	unsigned long long a;
	*pitch = w;
	CUresult rc = take(&a, (size_t)w * h);
	if (rc == OK)
		*p = (CUdeviceptr_v1)a;
	return rc;
}
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) { (void)s; return take(p, n); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, void *pool, void *s) { (void)pool, (void)s; return take(p, n); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, void *s) { (void)s; return take(p, n); }
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, void *pool, void *s) { (void)pool, (void)s; return take(p, n); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, void *s) { (void)s; return give(p); }
CUresult cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long f) { (void)prop, (void)f; return take(h, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { return give(p); }
CUresult cuMemFree(CUdeviceptr_v1 p) { return give(p); }
CUresult cuMemFreeAsync(CUdeviceptr p, void *s) { (void)s; return give(p); }
CUresult cuMemRelease(unsigned long long h) { return give(h); }
/* Arrays: their bytes as the cap counts them (w × h × d × element × channels;
 * the formats the tests use are 8-bit), handed out as addresses too. */
typedef struct { size_t w, h; int f; unsigned c; } desc2;
typedef struct { unsigned w, h; int f; unsigned c; } desc2v1;
typedef struct { size_t w, h, d; int f; unsigned c, flags; } desc3;
typedef struct { unsigned w, h, d; int f; unsigned c, flags; } desc3v1;
static size_t ext(size_t x) { return x ? x : 1; }
static size_t elem(int f) { return (f == 1 || f == 8) ? 1 : (f == 2 || f == 9 || f == 16) ? 2 : 4; }
CUresult cuArrayCreate_v2(void **a, const desc2 *d) { return take((unsigned long long *)a, d->w * ext(d->h) * elem(d->f) * ext(d->c)); }
CUresult cuArrayCreate(void **a, const desc2v1 *d) { return take((unsigned long long *)a, (size_t)d->w * ext(d->h) * elem(d->f) * ext(d->c)); }
CUresult cuArray3DCreate_v2(void **a, const desc3 *d) { return take((unsigned long long *)a, d->w * ext(d->h) * ext(d->d) * elem(d->f) * ext(d->c)); }
CUresult cuArray3DCreate(void **a, const desc3v1 *d) { return take((unsigned long long *)a, (size_t)d->w * ext(d->h) * ext(d->d) * elem(d->f) * ext(d->c)); }
CUresult cuMipmappedArrayCreate(void **a, const desc3 *d, unsigned levels) {
	size_t n = 0;
	for (unsigned l = 0; l < ext(levels); l++)
		n += ext(d->w >> l) * (d->h ? ext(d->h >> l) : 1) * (d->d ? ext(d->d >> l) : 1) * elem(d->f) * ext(d->c);
	return take((unsigned long long *)a, n);
}
CUresult cuArrayDestroy(void *a) { return give((unsigned long long)(uintptr_t)a); }
CUresult cuMipmappedArrayDestroy(void *a) { return give((unsigned long long)(uintptr_t)a); }

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total_) {
	*total_ = total();
	*free_ = *total_ - fakecuda_used();
	return OK;
}

/* The driver picks the version by name and the caller's CUDA version, as the
 * real one does: "cuMemAlloc" for CUDA ≥ 3.2 is cuMemAlloc_v2. */
static const struct {
	const char *name;
	int min_version;
	void *fn;
} procs[] = {
    {"cuMemAlloc", 3020, (void *)cuMemAlloc_v2},
    {"cuMemAlloc", 0, (void *)cuMemAlloc},
    {"cuMemFree", 3020, (void *)cuMemFree_v2},
    {"cuMemFree", 0, (void *)cuMemFree},
    {"cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2},
    {"cuMemAllocPitch", 0, (void *)cuMemAllocPitch},
    {"cuMemGetInfo", 3020, (void *)cuMemGetInfo_v2},
    {"cuMemAllocManaged", 0, (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", 0, (void *)cuMemAllocAsync},
    {"cuMemAllocAsync_ptsz", 0, (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync_ptsz", 0, (void *)cuMemFreeAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 0, (void *)cuMemAllocFromPoolAsync},
    {"cuMemCreate", 0, (void *)cuMemCreate},
    {"cuMemFreeAsync", 0, (void *)cuMemFreeAsync},
    {"cuMemRelease", 0, (void *)cuMemRelease},
    {"cuArrayCreate", 3020, (void *)cuArrayCreate_v2},
    {"cuArrayCreate", 0, (void *)cuArrayCreate},
    {"cuArray3DCreate", 3020, (void *)cuArray3DCreate_v2},
    {"cuArray3DCreate", 0, (void *)cuArray3DCreate},
    {"cuMipmappedArrayCreate", 0, (void *)cuMipmappedArrayCreate},
    {"cuArrayDestroy", 0, (void *)cuArrayDestroy},
    {"cuMipmappedArrayDestroy", 0, (void *)cuMipmappedArrayDestroy},
    {"cuInit", 0, (void *)cuInit},
    {"cuDriverGetVersion", 0, (void *)cuDriverGetVersion},
    {NULL, 0, NULL},
};

CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
	(void)flags;
	for (int i = 0; procs[i].name; i++) {
		if (!strcmp(procs[i].name, sym) && ver >= procs[i].min_version) {
			*pfn = procs[i].fn;
			return OK;
		}
	}
	*pfn = NULL;
	return NOT_FOUND;
}

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status) {
	CUresult rc = cuGetProcAddress(sym, pfn, ver, flags);
	if (status)
		*status = rc == OK ? 0 : 1;
	return rc;
}
