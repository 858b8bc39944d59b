#ifndef WSCHED_PROBE_ALLOC_H
#define WSCHED_PROBE_ALLOC_H
#include <stddef.h>

#define PROBE_MAX_ALLOCS 1024
#define PROBE_MIN_ALLOC (64 * 1024)

void probe_set_phase(int phase);
int probe_alloc_count(void);
size_t probe_alloc_size(int i);
int probe_alloc_phase(int i);
#endif
