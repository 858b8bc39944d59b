/*
 * arrays.c — the `preload` tier's cap on CUDA arrays (textures, surfaces):
 * cuArrayCreate(_v2), cuArray3DCreate(_v2), cuMipmappedArrayCreate and the
 * destroys, counted in key space 2 of the accounting (wsched_cuda_cap.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#include "cap.h"

/* The array descriptors (cuda.h): _v2 with size_t extents, v1 with 32-bit. */
typedef struct CUDA_ARRAY_DESCRIPTOR_st {
	size_t Width, Height;
	int Format;
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
	unsigned int Width, Height;
	int Format;
	unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
	size_t Width, Height, Depth;
	int Format;
	unsigned int NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
	unsigned int Width, Height, Depth;
	int Format;
	unsigned int NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* element_bytes is one channel's size for a CUarray_format: 8-, 16- and
 * 32-bit integers, half and float; the rest (packed video and
 * block-compressed formats) are counted as 4 bytes, which overcounts them. */
static size_t element_bytes(int format) {
	switch (format) {
	case 0x01: case 0x08: /* UNSIGNED_INT8, SIGNED_INT8 */
		return 1;
	case 0x02: case 0x09: case 0x10: /* UNSIGNED_INT16, SIGNED_INT16, HALF */
		return 2;
	}
	return 4;
}

/* array_bytes is what an array of w × h × d elements takes (a height or
 * depth of 0 is a 1D or 2D array), before the driver's alignment padding. */
static size_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned channels) {
	return w * (h ? h : 1) * (d ? d : 1) * element_bytes(format) * (channels ? channels : 1);
}

/* The extents' bytes of a 2D or 3D descriptor, v1 or _v2 (the same field
 * names); none without one (the driver refuses it). */
#define BYTES_2D(d) ((d) ? array_bytes((d)->Width, (d)->Height, 1, (d)->Format, (d)->NumChannels) : 0)
#define BYTES_3D(d) ((d) ? array_bytes((d)->Width, (d)->Height, (d)->Depth, (d)->Format, (d)->NumChannels) : 0)

/* COUNTED(n, call, arr) ends a create wrapper (COUNTED_IN) with the array
 * the call wrote to *arr as the key (key space 2). */
#define COUNTED(n, call, arr) COUNTED_IN(2, n, call, (unsigned long long)(uintptr_t)*(arr))

EXPORT CUresult cuArrayCreate_v2(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR *desc) {
	REAL(cuArrayCreate_v2)
	COUNTED(BYTES_2D(desc), r_cuArrayCreate_v2(arr, desc), arr);
}

EXPORT CUresult cuArrayCreate(CUarray *arr, const CUDA_ARRAY_DESCRIPTOR_v1 *desc) {
	REAL(cuArrayCreate)
	COUNTED(BYTES_2D(desc), r_cuArrayCreate(arr, desc), arr);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
	REAL(cuArray3DCreate_v2)
	COUNTED(BYTES_3D(desc), r_cuArray3DCreate_v2(arr, desc), arr);
}

EXPORT CUresult cuArray3DCreate(CUarray *arr, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc) {
	REAL(cuArray3DCreate)
	COUNTED(BYTES_3D(desc), r_cuArray3DCreate(arr, desc), arr);
}

/* mipmap_bytes: a mipmapped array holds every level, each halving the
 * extents (at least 1) of the one before. */
static size_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels) {
	size_t n = 0;
	for (unsigned l = 0; desc && l < (levels ? levels : 1) && l < 64; l++) {
		size_t w = desc->Width >> l, h = desc->Height >> l, d = desc->Depth >> l;
		n += array_bytes(w ? w : 1, desc->Height ? (h ? h : 1) : 0, desc->Depth ? (d ? d : 1) : 0, desc->Format, desc->NumChannels);
	}
	return n;
}

EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *arr, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels) {
	REAL(cuMipmappedArrayCreate)
	COUNTED(mipmap_bytes(desc, levels), r_cuMipmappedArrayCreate(arr, desc, levels), arr);
}

/* destroyed gives a destroyed array's bytes back when the driver agreed. */
static CUresult destroyed(CUresult rc, void *arr) {
	if (rc == CUDA_SUCCESS)
		forget(2, (unsigned long long)(uintptr_t)arr);
	return rc;
}

EXPORT CUresult cuArrayDestroy(CUarray arr) {
	REAL(cuArrayDestroy)
	return destroyed(r_cuArrayDestroy(arr), arr);
}

EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray arr) {
	REAL(cuMipmappedArrayDestroy)
	return destroyed(r_cuMipmappedArrayDestroy(arr), arr);
}
