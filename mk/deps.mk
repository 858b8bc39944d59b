# mk/deps.mk — whisper.cpp for the whisper backend, in a project-owned prefix, and the cgo flags to build
# against it.
#
#   make deps          everything `make test` needs (each area adds its part); whisper-deps for this one
#   make whisper-deps  packaging/deps/install-deps.sh: whisper.cpp + ggml into $(WHISPER_PREFIX) by the
#                      host's own packages (sid/forky/Ubuntu), Debian's source packages built with the
#                      host's cmake, or Debian's binary packages unpacked (not installed) with their
#                      runtime; no foreign apt source, no package from another suite, libc untouched.
#                      Idempotent. See docs/deps.md.
#
# Build anything that imports github.com/ggerganov/whisper.cpp/bindings/go with
#   $(WHISPER_GO_ENV) $(GO) build -tags $(WHISPER_GO_TAGS) ...
# WHISPER_GO_ENV sources $(WHISPER_PREFIX)/whisper.env, which the script writes: CGO_CFLAGS and
# CGO_LDFLAGS for the route it took (include path, rpath, and for unpacked packages their loader).
.PHONY: deps whisper-deps whisper-env shell-lint

WHISPER_PREFIX  ?= $(CURDIR)/.cache/whisper
WHISPER_GO_TAGS ?= whisper
WHISPER_GO_ENV   = . $(WHISPER_PREFIX)/whisper.env &&
export WHISPER_GO_TAGS

deps: whisper-deps
test: shell-lint

# The set-up and maintainer scripts run as root on users' machines: shellcheck them (Debian's package,
# installed by install-deps.sh).
SHELL_SCRIPTS = $(shell git ls-files '*.sh' 'packaging/scripts/*' .ci/run 2>/dev/null)
shell-lint:
	shellcheck -x $(SHELL_SCRIPTS)

# whisper.cpp and the build tools only: what `make plugins` (and so `make run`) needs.
whisper-deps:
	WSCHED_WHISPER_PREFIX="$(WHISPER_PREFIX)" bash packaging/deps/install-deps.sh

# Prints the cgo environment, for building or testing the backend by hand:
#   eval "$(make -s whisper-env)" && go test -tags whisper ./plugins/whisper/
whisper-env:
	@cat $(WHISPER_PREFIX)/whisper.env
