/*
 * next.c — an interposer loaded after the preload library (LD_PRELOAD=cap:next),
 * as another tool's preload would be: it wraps strtoll (which atoll calls) and
 * finds libc's through dlsym(RTLD_NEXT, …), which goes through the library's
 * dlsym wrapper. Were RTLD_NEXT searched after the library rather than after
 * this object, it would find its own strtoll and recurse until the stack
 * overflows.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

long long strtoll(const char *s, char **end, int base) {
	static long long (*next)(const char *, char **, int);
	if (!next)
		next = (long long (*)(const char *, char **, int))dlsym(RTLD_NEXT, "strtoll");
	return next ? next(s, end, base) * 2 : -1; /* doubled: the test sees the wrapper ran */
}
