# mk/enforce.mk — lease enforcement (issue 27; docs/enforcement.md).
#
#   make preload       $(BIN)/libwsched_cuda_cap.so: the `preload` tier's allocation cap (C, no CUDA headers
#                      needed), which the daemon puts in LD_PRELOAD for its holders; part of make build
#   make preload-test  the library built with -Werror, then the tests of ./enforce/... (which compile the
#                      library, the fake libcuda.so.1 and the test program themselves); part of make test
.PHONY: preload preload-test
CC             ?= cc
PRELOAD_SRC    := enforce/preload/c/wsched_cuda_cap.c
PRELOAD_LIB    := $(BIN)/libwsched_cuda_cap.so
PRELOAD_CFLAGS ?= -std=gnu11 -O2 -Wall -Wextra -fPIC -fvisibility=hidden

preload: $(PRELOAD_LIB)

$(PRELOAD_LIB): $(PRELOAD_SRC)
	@mkdir -p $(BIN)
	$(CC) $(PRELOAD_CFLAGS) -Werror -shared -Wl,-soname,libwsched_cuda_cap.so -o $@ $< -ldl -lpthread

preload-test: preload
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	TMPDIR=$$tmp $(GO) test -race -count=1 ./enforce/...

build: preload
test: preload-test
