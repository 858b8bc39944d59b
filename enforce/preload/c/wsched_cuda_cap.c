/*
 * wsched_cuda_cap.c — the `preload` enforcement tier (issue 27).
 *
 * wsched puts this library in LD_PRELOAD for the processes that hold a lease.
 * It wraps the CUDA driver's allocation entry points, counts what the process
 * holds on the GPU, and refuses (CUDA_ERROR_OUT_OF_MEMORY) an allocation that
 * would take the total past WSCHED_CUDA_LIMIT_BYTES (the lease plus
 * [enforcement] borrow; WSCHED_MEMORY_BYTES, the lease, when that is unset;
 * neither: count only). The frees give the bytes back.
 *
 * The CUDA runtime does not call these symbols by name: it dlopens
 * libcuda.so.1, dlsyms cuGetProcAddress and resolves every entry point
 * through it. So, as HAMi-core does, the library also wraps
 * cuGetProcAddress(_v2) and dlsym: whatever pointer the driver hands out for
 * an entry point wrapped here is swapped for the wrapper.
 *
 * When an allocation is refused, or the total passes the lease (borrowing)
 * or comes back within it, the library tells the daemon at once (report.c).
 *
 * Known gaps (docs/enforcement.md): memory pools are counted by what was
 * allocated from them, not what they keep cached; the context, module and
 * library loads are not counted; a process that calls the driver through
 * its own ioctl wrapper is not seen.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cap.h"

typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemHandle;
typedef void *CUstream;
typedef void *CUmemoryPool;
typedef unsigned long long cuuint64_t;

/* ---- the real driver ------------------------------------------------ */

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_p;

static void *real_dlsym(void *h, const char *name) {
	if (!real_dlsym_p) {
		/* glibc ≥ 2.34 keeps dlsym in libc at GLIBC_2.34; older ones at the
		 * architecture's base version. dlvsym itself is not wrapped. */
		static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0", NULL};
		for (int i = 0; versions[i] && !real_dlsym_p; i++)
			real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
		if (!real_dlsym_p)
			return NULL;
	}
	return real_dlsym_p(h, name);
}

/* real looks name up in the driver: the next object after this one, else
 * libcuda.so.1 (which the runtime dlopens after start). */
void *real(const char *name) {
	void *p = real_dlsym(RTLD_NEXT, name);
	if (p)
		return p;
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen("libcuda.so.1", RTLD_LAZY);
	return h ? real_dlsym(h, name) : NULL;
}

/* ---- accounting ------------------------------------------------------ */

#define BUCKETS 4096
struct entry {
	unsigned long long key;
	size_t bytes;
	struct entry *next;
};
/* Three key spaces: device pointers, cuMemCreate's handles, and arrays
 * (CUarray, CUmipmappedArray). */
static struct entry *table[3][BUCKETS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t used, peak, refused_total;
static long long limit = -1, lease = -1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static long long env_bytes(const char *name) {
	const char *v = getenv(name);
	if (!v || !*v)
		return -1;
	char *end;
	long long n = strtoll(v, &end, 10);
	return (*end || n < 0) ? -1 : n;
}

static void init(void) {
	lease = env_bytes("WSCHED_MEMORY_BYTES");
	limit = env_bytes("WSCHED_CUDA_LIMIT_BYTES");
	if (limit < 0)
		limit = lease;
}

static unsigned bucket(unsigned long long k) { return (unsigned)((k >> 8) ^ (k >> 20) ^ k) % BUCKETS; }


/* reserve takes n bytes when they fit under the limit; else it counts a
 * refusal, reports it and answers 0. */
int reserve(size_t n) {
	pthread_once(&once, init);
	pthread_mutex_lock(&mu);
	int ok = limit < 0 || used + n <= (size_t)limit;
	size_t before = used;
	if (ok) {
		used += n;
		if (used > peak)
			peak = used;
	} else {
		refused_total += n;
	}
	int borrowing = ok && lease >= 0 && before <= (size_t)lease && used > (size_t)lease;
	pthread_mutex_unlock(&mu);
	if (!ok)
		report(n);
	else if (borrowing)
		report(0);
	return ok;
}

/* grow counts n bytes the driver took beyond those reserved (a pitch it
 * rounded up): never refused, as the driver holds them already, but the
 * peak and the passing of the lease are as reserve's. */
static void grow(size_t n) {
	pthread_mutex_lock(&mu);
	size_t before = used;
	used += n;
	if (used > peak)
		peak = used;
	int borrowing = lease >= 0 && before <= (size_t)lease && used > (size_t)lease;
	pthread_mutex_unlock(&mu);
	if (borrowing)
		report(0);
}

static void unreserve(size_t n) {
	pthread_mutex_lock(&mu);
	used = n > used ? 0 : used - n;
	pthread_mutex_unlock(&mu);
}

static void remember(int space, unsigned long long key, size_t n) {
	struct entry *e = malloc(sizeof *e);
	if (!e)
		return; /* counted, but its free will not give it back */
	e->key = key;
	e->bytes = n;
	pthread_mutex_lock(&mu);
	unsigned b = bucket(key);
	e->next = table[space][b];
	table[space][b] = e;
	pthread_mutex_unlock(&mu);
}

/* forget gives a freed allocation's bytes back; dropping from past the lease
 * to within it is reported (the borrowing ended). */
void forget(int space, unsigned long long key) {
	pthread_mutex_lock(&mu);
	for (struct entry **p = &table[space][bucket(key)]; *p; p = &(*p)->next) {
		if ((*p)->key == key) {
			struct entry *e = *p;
			*p = e->next;
			size_t before = used;
			used = e->bytes > used ? 0 : used - e->bytes;
			int returned = lease >= 0 && before > (size_t)lease && used <= (size_t)lease;
			pthread_mutex_unlock(&mu);
			free(e);
			if (returned)
				report(0);
			return;
		}
	}
	pthread_mutex_unlock(&mu);
}

/* after an allocation call: keep the bytes and remember the pointer, or
 * give them back when the driver refused. */
CUresult settle(CUresult rc, int space, unsigned long long key, size_t n) {
	if (rc == CUDA_SUCCESS)
		remember(space, key, n);
	else
		unreserve(n);
	return rc;
}

/* cap_state reads the counts for a report (report.c). */
void cap_state(struct cap_state *out) {
	pthread_once(&once, init);
	pthread_mutex_lock(&mu);
	out->used = used;
	out->peak = peak;
	out->refused_total = refused_total;
	out->limit = limit;
	pthread_mutex_unlock(&mu);
}

/* Across fork the lock is held by the forking thread, so the child does not
 * inherit it taken by a thread it does not have. */
static void fork_prepare(void) { pthread_mutex_lock(&mu); }
static void fork_parent(void) { pthread_mutex_unlock(&mu); }
static void fork_child(void) { pthread_mutex_unlock(&mu); }

__attribute__((constructor)) static void setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* ---- the wrapped entry points ----------------------------------------- */

/* freed gives a freed key's bytes back when the driver agreed. */
static CUresult freed(CUresult rc, int space, unsigned long long key) {
	if (rc == CUDA_SUCCESS)
		forget(space, key);
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) {
	REAL(cuMemAlloc_v2)
	COUNTED_IN(0, n, r_cuMemAlloc_v2(dptr, n), *dptr);
}

EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int n) {
	REAL(cuMemAlloc)
	COUNTED_IN(0, n, r_cuMemAlloc(dptr, n), *dptr);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned int flags) {
	REAL(cuMemAllocManaged)
	COUNTED_IN(0, n, r_cuMemAllocManaged(dptr, n, flags), *dptr);
}

/* The pitch is at least the width: width × height is reserved first, then
 * the count is corrected to pitch × height. */
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned int elem) {
	REAL(cuMemAllocPitch_v2)
	size_t n = w * h;
	if (!reserve(n))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = r_cuMemAllocPitch_v2(dptr, pitch, w, h, elem);
	if (rc == CUDA_SUCCESS && *pitch * h > n) {
		grow(*pitch * h - n);
		n = *pitch * h;
	}
	return settle(rc, 0, rc == CUDA_SUCCESS ? *dptr : 0, n);
}

EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int w, unsigned int h, unsigned int elem) {
	REAL(cuMemAllocPitch)
	size_t n = (size_t)w * h;
	if (!reserve(n))
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult rc = r_cuMemAllocPitch(dptr, pitch, w, h, elem);
	if (rc == CUDA_SUCCESS && (size_t)*pitch * h > n) {
		grow((size_t)*pitch * h - n);
		n = (size_t)*pitch * h;
	}
	return settle(rc, 0, rc == CUDA_SUCCESS ? *dptr : 0, n);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s) {
	REAL(cuMemAllocAsync)
	COUNTED_IN(0, n, r_cuMemAllocAsync(dptr, n, s), *dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s) {
	REAL(cuMemAllocFromPoolAsync)
	COUNTED_IN(0, n, r_cuMemAllocFromPoolAsync(dptr, n, pool, s), *dptr);
}

/* The per-thread-default-stream variants, which cuGetProcAddress hands out
 * to code built with --default-stream per-thread. */
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) {
	REAL(cuMemAllocAsync_ptsz)
	COUNTED_IN(0, n, r_cuMemAllocAsync_ptsz(dptr, n, s), *dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream s) {
	REAL(cuMemAllocFromPoolAsync_ptsz)
	COUNTED_IN(0, n, r_cuMemAllocFromPoolAsync_ptsz(dptr, n, pool, s), *dptr);
}

EXPORT CUresult cuMemCreate(CUmemHandle *handle, size_t n, const void *prop, unsigned long long flags) {
	REAL(cuMemCreate)
	COUNTED_IN(1, n, r_cuMemCreate(handle, n, prop, flags), *handle);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
	REAL(cuMemFree_v2)
	return freed(r_cuMemFree_v2(p), 0, p);
}

EXPORT CUresult cuMemFree(CUdeviceptr_v1 p) {
	REAL(cuMemFree)
	return freed(r_cuMemFree(p), 0, p);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
	REAL(cuMemFreeAsync)
	return freed(r_cuMemFreeAsync(p, s), 0, p);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
	REAL(cuMemFreeAsync_ptsz)
	return freed(r_cuMemFreeAsync_ptsz(p, s), 0, p);
}

EXPORT CUresult cuMemRelease(CUmemHandle h) {
	REAL(cuMemRelease)
	return freed(r_cuMemRelease(h), 1, h);
}

/* cuMemGetInfo answers within the cap, so frameworks that size their caches
 * from it (PyTorch, TensorFlow) stay inside the lease. */
EXPORT CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	REAL(cuMemGetInfo_v2)
	CUresult rc = r_cuMemGetInfo_v2(free_, total);
	pthread_once(&once, init);
	if (rc != CUDA_SUCCESS || limit < 0)
		return rc;
	pthread_mutex_lock(&mu);
	size_t room = used >= (size_t)limit ? 0 : (size_t)limit - used;
	pthread_mutex_unlock(&mu);
	if (*free_ > room)
		*free_ = room;
	if (*total > (size_t)limit)
		*total = (size_t)limit;
	return rc;
}

/* ---- resolution through cuGetProcAddress and dlsym --------------------- */

struct wrapped {
	const char *name;
	void *wrapper;
};
static const struct wrapped wrappers[] = {
    {"cuMemAlloc", (void *)cuMemAlloc},
    {"cuMemAlloc_v2", (void *)cuMemAlloc_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged},
    {"cuMemAllocPitch", (void *)cuMemAllocPitch},
    {"cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync_ptsz", (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", (void *)cuMemCreate},
    {"cuMemFree", (void *)cuMemFree},
    {"cuMemFree_v2", (void *)cuMemFree_v2},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync},
    {"cuMemRelease", (void *)cuMemRelease},
    {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2},
    {"cuArrayCreate", (void *)cuArrayCreate},
    {"cuArrayCreate_v2", (void *)cuArrayCreate_v2},
    {"cuArray3DCreate", (void *)cuArray3DCreate},
    {"cuArray3DCreate_v2", (void *)cuArray3DCreate_v2},
    {"cuMipmappedArrayCreate", (void *)cuMipmappedArrayCreate},
    {"cuArrayDestroy", (void *)cuArrayDestroy},
    {"cuMipmappedArrayDestroy", (void *)cuMipmappedArrayDestroy},
    {"cuGetProcAddress", NULL}, /* filled below: defined after this table */
    {"cuGetProcAddress_v2", NULL},
    {NULL, NULL},
};

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, void *status);

static void *wrapper_of_name(const char *name) {
	if (!strcmp(name, "cuGetProcAddress"))
		return (void *)cuGetProcAddress;
	if (!strcmp(name, "cuGetProcAddress_v2"))
		return (void *)cuGetProcAddress_v2;
	for (const struct wrapped *w = wrappers; w->name; w++)
		if (w->wrapper && !strcmp(w->name, name))
			return w->wrapper;
	return NULL;
}

/* swap replaces a pointer the driver handed out for an entry point wrapped
 * here with its wrapper: the driver picks the version (cuMemAlloc asked for
 * CUDA ≥ 3.2 is cuMemAlloc_v2), so the pointer, not the name, decides. */
static void *swap(void *p) {
	if (!p)
		return p;
	for (const struct wrapped *w = wrappers; w->name; w++) {
		void *r = real(w->name);
		if (r && r == p)
			return wrapper_of_name(w->name);
	}
	return p;
}

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags) {
	REAL(cuGetProcAddress)
	CUresult rc = r_cuGetProcAddress(sym, pfn, ver, flags);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = swap(*pfn);
	return rc;
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, void *status) {
	REAL(cuGetProcAddress_v2)
	CUresult rc = r_cuGetProcAddress_v2(sym, pfn, ver, flags, status);
	if (rc == CUDA_SUCCESS && pfn)
		*pfn = swap(*pfn);
	return rc;
}

/* next_after is dlsym(RTLD_NEXT, name) as the caller would get it: the first
 * object after the caller's in the link map that defines name itself. Going
 * through the wrapper, RTLD_NEXT would otherwise search after this library,
 * and an interposer loaded after it would find its own symbol again. */
static void *next_after(const void *caller, const char *name) {
	Dl_info info;
	struct link_map *lm = NULL;
	if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return NULL;
	for (struct link_map *l = lm->l_next; l; l = l->l_next) {
		/* A link map is not a handle dlsym may search (its scope may be
		 * unset): reopen the object by name (the vdso has none). */
		void *h = l->l_name && l->l_name[0] ? dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD) : NULL;
		if (!h)
			continue;
		void *p = real_dlsym(h, name);
		dlclose(h);
		Dl_info pi;
		struct link_map *pl = NULL;
		if (p && dladdr1(p, &pi, (void **)&pl, RTLD_DL_LINKMAP) && pl == l)
			return p;
	}
	return NULL;
}

/* dlsym: the runtime looks cuGetProcAddress up in its own handle of
 * libcuda.so.1, which LD_PRELOAD does not interpose. */
EXPORT void *dlsym(void *h, const char *name) {
	void *p = h == RTLD_NEXT ? next_after(__builtin_return_address(0), name) : real_dlsym(h, name);
	if (!p || name[0] != 'c' || name[1] != 'u')
		return p;
	void *w = wrapper_of_name(name);
	return (w && p != w) ? w : p;
}
