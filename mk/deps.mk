# mk/deps.mk — system dependencies of the whisper.cpp backend, and the cgo flags to build against them.
#
#   make deps    installs libwhisper-dev/libggml-dev (Debian 13+/sid directly, Debian 12 from sid through a
#                pinned partial upgrade), an empty stub libggml-cpu.so, gcc/g++/pkg-config/systemd when
#                missing. Idempotent: a second run prints one line. See packaging/deps/install-deps.sh.
#
# Build anything that imports github.com/ggerganov/whisper.cpp/bindings/go with
#   $(WHISPER_GO_ENV) $(GO) build -tags $(WHISPER_GO_TAGS) ...
# The bindings hard-link -lggml-cpu, which Debian does not ship (its CPU backend is a module loaded by
# ggml_backend_load_all()); --as-needed drops the stub from the binary's NEEDED list, so the stub is a
# build-time requirement only.
.PHONY: deps whisper-deps

WHISPER_STUB_DIR    ?= /usr/local/lib
WHISPER_GO_TAGS     ?= whisper
ifndef WHISPER_CGO_CFLAGS
WHISPER_CGO_CFLAGS  := -O2 -g $(shell pkg-config --cflags whisper 2>/dev/null)
endif
WHISPER_CGO_LDFLAGS ?= -L$(WHISPER_STUB_DIR) -Wl,--as-needed
WHISPER_GO_ENV       = CGO_ENABLED=1 CGO_CFLAGS="$(WHISPER_CGO_CFLAGS)" CGO_LDFLAGS="$(WHISPER_CGO_LDFLAGS)"
export WHISPER_STUB_DIR WHISPER_GO_TAGS WHISPER_CGO_CFLAGS WHISPER_CGO_LDFLAGS

deps: whisper-deps

# libwhisper and the build tools only: what `make plugins` (and so `make run`) needs.
whisper-deps:
	WSCHED_STUB_DIR="$(WHISPER_STUB_DIR)" bash packaging/deps/install-deps.sh
