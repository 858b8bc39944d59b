/*
 * cap.h — what the parts of libwsched_cuda_cap.so share. Internal: the
 * library is built with -fvisibility=hidden, so none of this is exported.
 */
#ifndef WSCHED_CAP_H
#define WSCHED_CAP_H

#include <stddef.h>

typedef int CUresult;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define EXPORT __attribute__((visibility("default")))

/* real looks name up in the driver (wsched_cuda_cap.c). */
void *real(const char *name);

/* REAL(name) opens a wrapper: r_name is the driver's function, looked up
 * once; without it the wrapper answers CUDA_ERROR_UNKNOWN. */
#define REAL(name)                                                \
	typedef __typeof__(&name) name##_fn;                      \
	static _Atomic(name##_fn) real_##name;                    \
	name##_fn r_##name = atomic_load(&real_##name);           \
	if (!r_##name) {                                          \
		r_##name = (name##_fn)real(#name);                \
		atomic_store(&real_##name, r_##name);             \
	}                                                         \
	if (!r_##name)                                            \
		return 999 /* CUDA_ERROR_UNKNOWN */;

/* The accounting (wsched_cuda_cap.c): reserve takes n bytes when they fit
 * under the cap (else counts and reports a refusal and answers 0); settle,
 * after the driver's answer, remembers key (in key space 0 pointers, 1
 * cuMemCreate handles, 2 arrays) or gives the bytes back; forget gives a
 * freed key's bytes back. */
int reserve(size_t n);
CUresult settle(CUresult rc, int space, unsigned long long key, size_t n);
void forget(int space, unsigned long long key);

/* COUNTED_IN(space, n, call, key) ends an allocating wrapper: reserve n
 * bytes (else CUDA_ERROR_OUT_OF_MEMORY), make the driver's call, and settle
 * with key (read after the call) in key space space, or give n back. */
#define COUNTED_IN(space, n, call, key)                                               \
	do {                                                                          \
		size_t n_ = (n);                                                      \
		if (!reserve(n_))                                                     \
			return CUDA_ERROR_OUT_OF_MEMORY;                              \
		CUresult rc_ = (call);                                                \
		return settle(rc_, (space), rc_ == CUDA_SUCCESS ? (key) : 0, n_);     \
	} while (0)

/* The array wrappers (arrays.c), for the cuGetProcAddress/dlsym table. */
typedef void *CUarray;
typedef void *CUmipmappedArray;
struct CUDA_ARRAY_DESCRIPTOR_st;
struct CUDA_ARRAY_DESCRIPTOR_v1_st;
struct CUDA_ARRAY3D_DESCRIPTOR_st;
struct CUDA_ARRAY3D_DESCRIPTOR_v1_st;
EXPORT CUresult cuArrayCreate_v2(CUarray *arr, const struct CUDA_ARRAY_DESCRIPTOR_st *desc);
EXPORT CUresult cuArrayCreate(CUarray *arr, const struct CUDA_ARRAY_DESCRIPTOR_v1_st *desc);
EXPORT CUresult cuArray3DCreate_v2(CUarray *arr, const struct CUDA_ARRAY3D_DESCRIPTOR_st *desc);
EXPORT CUresult cuArray3DCreate(CUarray *arr, const struct CUDA_ARRAY3D_DESCRIPTOR_v1_st *desc);
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const struct CUDA_ARRAY3D_DESCRIPTOR_st *desc, unsigned int levels);
EXPORT CUresult cuArrayDestroy(CUarray arr);
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr);

/* cap_state is the accounting a report carries. */
struct cap_state {
	size_t used, peak, refused_total;
	long long limit; /* -1: no cap */
};

/* cap_state reads the counts (wsched_cuda_cap.c). */
void cap_state(struct cap_state *out);

/* report tells the daemon the process's use, with refused the allocation
 * just refused (0: it passed its lease, or came back within it), from a
 * detached thread; the caller does not wait (report.c). */
void report(size_t refused);

#endif
