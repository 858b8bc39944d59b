/*
 * cap.h — what the parts of libwsched_cuda_cap.so share. Internal: the
 * library is built with -fvisibility=hidden, so none of this is exported.
 */
#ifndef WSCHED_CAP_H
#define WSCHED_CAP_H

#include <stddef.h>

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
