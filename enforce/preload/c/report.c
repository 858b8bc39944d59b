/*
 * report.c — the preload tier's reports to the daemon: when an allocation is
 * refused, or the process's total passes its lease or comes back within it,
 * a detached thread sends POST /v1/leases/$WSCHED_LEASE_ID/usage over the
 * Unix socket ($WSCHED_SOCKET; else /run/wsched/wsched.sock for root,
 * $XDG_RUNTIME_DIR/wsched.sock otherwise). The allocating thread never
 * waits; one report is in flight at a time, and a newer state follows it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cap.h"

static atomic_int inflight, pending;
static pthread_mutex_t rmu = PTHREAD_MUTEX_INITIALIZER; /* guards last_refused */
static size_t last_refused;

static const char *socket_path(char *buf, size_t size) {
	const char *s = getenv("WSCHED_SOCKET");
	if (s && *s)
		return s;
	if (getuid() == 0)
		return "/run/wsched/wsched.sock";
	const char *x = getenv("XDG_RUNTIME_DIR");
	if (!x || !*x)
		return NULL;
	snprintf(buf, size, "%s/wsched.sock", x);
	return buf;
}

static void send_report(void) {
	const char *id = getenv("WSCHED_LEASE_ID");
	char pathbuf[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *path = socket_path(pathbuf, sizeof pathbuf);
	if (!id || !*id || strlen(id) > 64 || !path || strlen(path) >= sizeof pathbuf)
		return;
	for (const char *c = id; *c; c++) /* lease IDs are l-<hex>: nothing that could bend the request line */
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
			return;
	struct cap_state st;
	cap_state(&st);
	pthread_mutex_lock(&rmu);
	size_t r = last_refused;
	last_refused = 0; /* sent once; a later report without a refusal says 0 */
	pthread_mutex_unlock(&rmu);
	char body[256], req[768];
	int bn = snprintf(body, sizeof body,
			  "{\"pid\":%d,\"used_bytes\":%zu,\"peak_bytes\":%zu,\"limit_bytes\":%lld,"
			  "\"refused_bytes\":%zu,\"refused_total_bytes\":%zu}",
			  (int)getpid(), st.used, st.peak, st.limit, r, st.refused_total);
	int rn = snprintf(req, sizeof req,
			  "POST /v1/leases/%s/usage HTTP/1.1\r\nHost: wsched\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
			  id, bn, body);
	if (bn <= 0 || rn <= 0 || (size_t)rn >= sizeof req)
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && send(fd, req, (size_t)rn, MSG_NOSIGNAL) == rn) {
		char buf[512]; /* wait for the answer, so the daemon's handler runs to its end */
		while (read(fd, buf, sizeof buf) > 0)
			;
	}
	close(fd);
}

static void *reporter(void *arg) {
	(void)arg;
	for (;;) {
		atomic_store(&pending, 0);
		send_report();
		atomic_store(&inflight, 0);
		/* a report asked for while this one was sent goes out now */
		if (!atomic_load(&pending) || atomic_exchange(&inflight, 1))
			return NULL;
	}
}

void report(size_t refused) {
	pthread_mutex_lock(&rmu);
	if (refused)
		last_refused = refused;
	pthread_mutex_unlock(&rmu);
	atomic_store(&pending, 1);
	if (atomic_exchange(&inflight, 1))
		return;
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, reporter, NULL) != 0)
		atomic_store(&inflight, 0);
	pthread_attr_destroy(&a);
}

/* Across fork the lock is held by the forking thread; the child has no
 * reporter thread. */
static void fork_prepare(void) { pthread_mutex_lock(&rmu); }
static void fork_parent(void) { pthread_mutex_unlock(&rmu); }
static void fork_child(void) {
	pthread_mutex_unlock(&rmu);
	atomic_store(&inflight, 0);
	atomic_store(&pending, 0);
}

__attribute__((constructor)) static void setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* flush gives a report in flight up to a second at exit: a process that
 * exits on its refused allocation still reaches the daemon. */
__attribute__((destructor)) static void flush(void) {
	for (int i = 0; i < 100 && atomic_load(&inflight); i++)
		usleep(10000);
}

