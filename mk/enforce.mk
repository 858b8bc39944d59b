# mk/enforce.mk — lease enforcement (issue 27; docs/enforcement.md).
#
#   make preload        $(BIN)/libwsched_cuda_cap.so: the `preload` tier's allocation cap (C, no CUDA headers
#                       needed), which the daemon puts in LD_PRELOAD for its holders when it is installed beside
#                       wsched or in /usr/lib/wsched; part of make build, and (built with -Werror) of make test
#   make preload-test   the race-enabled tests of ./enforce/... and ./internal/cgroup/ alone (make gotest runs
#                       them too): they compile the library, the fake libcuda.so.1 and the test program themselves
#   make preload-bench  the cap's cost per cuMemAlloc_v2 + cuMemFree_v2 on the fake driver, bare and capped, side
#                       by side
.PHONY: preload preload-test preload-bench
CC             ?= cc
PRELOAD_SRC    := enforce/preload/c/wsched_cuda_cap.c enforce/preload/c/arrays.c enforce/preload/c/report.c
PRELOAD_LIB    := $(BIN)/libwsched_cuda_cap.so
PRELOAD_CFLAGS ?= -std=gnu11 -O2 -Wall -Wextra -fPIC -fvisibility=hidden
# The packaged copy (make deb, /usr/lib/wsched/libwsched_cuda_cap.so): stripped and hardened as
# Debian's dpkg-buildflags would, so that lintian stays quiet.
PRELOAD_DEB_FLAGS := -Werror -shared -s -Wl,-soname,libwsched_cuda_cap.so -D_FORTIFY_SOURCE=2 \
	-fstack-protector-strong -Wl,-z,relro -Wl,-z,now

preload: $(PRELOAD_LIB)

$(PRELOAD_LIB): $(PRELOAD_SRC) enforce/preload/c/cap.h
	@mkdir -p $(BIN)
	$(CC) $(PRELOAD_CFLAGS) -Werror -shared -Wl,-soname,libwsched_cuda_cap.so -o $@ $(PRELOAD_SRC) -ldl -lpthread

preload-test: preload
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	TMPDIR=$$tmp $(GO) test -race -count=1 ./enforce/... ./internal/cgroup/

preload-bench:
	$(GO) test -run '^$$' -bench CapOverhead -benchtime 5x ./enforce/preload/

build: preload
test: preload

# The cgroup file parsers join `make fuzz`. Target-specific: this file is read before mk/fuzz.mk, whose
# `FUZZ_TARGETS ?=` a global `+=` here would switch off.
fuzz: FUZZ_TARGETS += ./internal/cgroup:FuzzParseCgroupFiles
