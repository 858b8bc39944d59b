# wsched — see README.md. Area-specific targets live in mk/*.mk; each adds
# its own prerequisites to `deps`, `test` and `build` where it needs to.
GO          ?= go
BIN         ?= bin
TOOLS       ?= $(CURDIR)/.cache/tools
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(TOOLS)/staticcheck
# make run CONFIG=testdata/sim-8x4090.toml runs against the simulated 8-GPU box.
CONFIG      ?=
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')

.PHONY: all build run test deps tools fmt-check vet staticcheck gotest fuzz clean
all: build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN)/ ./cmd/wsched

# Runs the daemon in the foreground (Ctrl-C stops it), with the whisper.cpp
# backend from bin/ (plugins: libwhisper is installed first when missing). As
# root it serves /run/wsched/wsched.sock, otherwise $$XDG_RUNTIME_DIR/wsched.sock.
# Without CONFIG it runs testdata/dev.toml: simulated GPUs (where the NVIDIA
# driver's NVML library is installed, a copy with provider "auto": the real
# ones), and the weightless whisper.cpp test models of ../shared when present.
DEV_MODELS := $(wildcard ../shared/models/whisper-empty)
DEV_NVML   := $(shell ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1 ' && echo yes)
DEV_CONFIG := $(if $(DEV_NVML),$(BIN)/dev-nvml.toml,testdata/dev.toml)
run: build plugins $(if $(CONFIG),,$(DEV_CONFIG))
	$(if $(CONFIG),,$(if $(DEV_MODELS),WSCHED_MODELS_DIR=$(abspath $(DEV_MODELS)) ))$(BIN)/wsched serve --config $(or $(CONFIG),$(DEV_CONFIG))

$(BIN)/dev-nvml.toml: testdata/dev.toml
	mkdir -p $(BIN) && sed 's/^provider = "sim"$$/provider = "auto"/' $< >$@

# The README's test command: everything CI checks.
test: deps fmt-check vet staticcheck gotest

deps: tools
tools: $(STATICCHECK)

$(STATICCHECK):
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

# In a TMPDIR of its own, which must be empty afterwards: tests leave nothing behind (packages that
# start processes also check this themselves, through internal/testtmp).
gotest:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "TMPDIR=$$tmp $(GO) test -race -count=1 ./..." && \
	TMPDIR=$$tmp $(GO) test -race -count=1 ./... && \
	left=$$(ls -A "$$tmp") && if [ -n "$$left" ]; then echo "gotest: tests left in TMPDIR: $$left"; exit 1; fi

clean:
	rm -rf $(BIN) dist .cache

-include mk/*.mk
