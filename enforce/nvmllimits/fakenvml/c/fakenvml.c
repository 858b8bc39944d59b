/* A fake libnvidia-ml.so.1 for the nvml-limits tier's tests (issue 27): the
 * few calls package nvmllimits makes, each appended as one line to the file
 * $WSCHED_FAKE_NVML_LOG. Built with -DNO_LIMITS it lacks the R615
 * memory-limits call, as an older driver does. Device handles are 1-based
 * indexes into the UUIDs seen. A set on a directory that does not exist
 * (the cgroup already removed) is logged with " missing" at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdarg.h>
#include <unistd.h>

typedef struct {
	const char *nameSpace;
	unsigned long long softLimit;
	unsigned long long hardLimit;
} nvmlSetMemoryLimits_v1_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char uuids[64][96];
static int nuuids;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
	const char *path = getenv("WSCHED_FAKE_NVML_LOG");
	if (!path || !*path) return;
	FILE *f = fopen(path, "a");
	if (!f) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

int nvmlInit_v2(void) { logf_("init\n"); return 0; }
int nvmlShutdown(void) { logf_("shutdown\n"); return 0; }
const char *nvmlErrorString(int rc) { return rc == 13 ? "Not Supported" : rc == 3 ? "Not Found" : "Unknown Error"; }

int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev) {
	if (!uuid || strncmp(uuid, "GPU-", 4) != 0) return 3; /* NVML_ERROR_NOT_FOUND */
	pthread_mutex_lock(&mu);
	int i;
	for (i = 0; i < nuuids && strcmp(uuids[i], uuid) != 0; i++) {}
	if (i == nuuids && nuuids < 64) snprintf(uuids[nuuids++], sizeof uuids[0], "%s", uuid);
	pthread_mutex_unlock(&mu);
	*dev = (void *)(long)(i + 1);
	return 0;
}

#ifndef NO_LIMITS
int nvmlDeviceSetMemoryLimits_v1(void *dev, nvmlSetMemoryLimits_v1_t *l) {
	long i = (long)dev - 1;
	if (i < 0 || i >= nuuids || !l || !l->nameSpace) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	logf_("set %s %s %llu %llu%s\n", uuids[i], l->nameSpace, l->softLimit, l->hardLimit,
	      access(l->nameSpace, F_OK) == 0 ? "" : " missing");
	return 0;
}
#endif
