/* hog.c — a GPU client for the contention run of issue 27 (contention.sh).
 *
 *   hog BYTES SECONDS [PIECE [PAUSE]]
 *
 * creates a CUDA context on device 0, allocates BYTES in PIECE-byte pieces
 * (default 256 MiB; with PAUSE, half of BYTES, then PAUSE seconds later the
 * rest, as a job that loads its model and then grows its buffers) with
 * cuMemAlloc_v2, holds them SECONDS, frees them and exits: 0 when every
 * piece was allocated, 3 when the driver (or the preload cap) answered
 * CUDA_ERROR_OUT_OF_MEMORY, 4 on any other error. It reaches the driver the
 * way the CUDA runtime does — dlopen("libcuda.so.1") and dlsym — so the
 * preload tier's cap sees it; no CUDA headers or nvcc needed (cc hog.c -ldl).
 * An honest client asks its lease for at least BYTES plus its context; the
 * lying one asks for less than it allocates.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*devget_fn)(int *, int);
typedef int (*ctx_fn)(void **, unsigned, int);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

#define PIECE (256ULL << 20)
#define MAXPIECES 4096

int main(int argc, char **argv) {
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: hog BYTES SECONDS [PIECE [PAUSE]]\n");
		return 4;
	}
	unsigned long long want = strtoull(argv[1], NULL, 10);
	int hold = atoi(argv[2]);
	unsigned long long piece_bytes = argc >= 4 ? strtoull(argv[3], NULL, 10) : PIECE;
	if (!piece_bytes)
		piece_bytes = PIECE;
	int pause = argc == 5 ? atoi(argv[4]) : 0;
	unsigned long long first = pause > 0 ? want / 2 : want;
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "hog: %s\n", dlerror());
		return 4;
	}
	init_fn cuInit = (init_fn)dlsym(h, "cuInit");
	devget_fn cuDeviceGet = (devget_fn)dlsym(h, "cuDeviceGet");
	ctx_fn cuCtxCreate = (ctx_fn)dlsym(h, "cuCtxCreate_v2");
	alloc_fn cuMemAlloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
	free_fn cuMemFree = (free_fn)dlsym(h, "cuMemFree_v2");
	if (!cuInit || !cuDeviceGet || !cuCtxCreate || !cuMemAlloc || !cuMemFree) {
		fprintf(stderr, "hog: libcuda.so.1 lacks an entry point\n");
		return 4;
	}
	int dev, rc;
	void *ctx;
	if ((rc = cuInit(0)) || (rc = cuDeviceGet(&dev, 0)) || (rc = cuCtxCreate(&ctx, 0, dev))) {
		fprintf(stderr, "hog: context: CUresult %d\n", rc);
		return rc == 2 ? 3 : 4;
	}
	static unsigned long long ptr[MAXPIECES];
	unsigned long long got = 0;
	int n = 0, status = 0;
	while (got < want && n < MAXPIECES) {
		if (got >= first && pause > 0) {
			sleep(pause);
			pause = 0;
		}
		unsigned long long upto = pause > 0 ? first : want;
		size_t piece = upto - got < piece_bytes ? upto - got : piece_bytes;
		if ((rc = cuMemAlloc(&ptr[n], piece)) != 0) {
			status = rc == 2 ? 3 : 4;
			break;
		}
		got += piece;
		n++;
	}
	printf("pid %d allocated %llu of %llu bytes%s (CUresult %d)\n", (int)getpid(), got, want,
	       status == 3 ? ": out of memory" : "", rc);
	fflush(stdout);
	sleep(hold);
	for (int i = 0; i < n; i++)
		cuMemFree(ptr[i]);
	return status;
}
