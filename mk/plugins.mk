# mk/plugins.mk — transcription backends, built as plugin binaries (issue 6).
#
#   make plugins        every backend into $(BIN)/: $(BIN)/wsched-backend-whisper (cgo against libwhisper,
#                       which make deps installs; flags from mk/deps.mk), $(BIN)/wsched-backend-exec
#                       (pure Go: existing apps as backends) and $(BIN)/wsched-backend-sherpa (plugins-sherpa)
#   make plugins-sherpa $(BIN)/wsched-backend-sherpa and the sherpa-onnx / ONNX Runtime libraries the Go module
#                       github.com/k2-fsa/sherpa-onnx-go-linux ships, copied beside it (rpath $$ORIGIN). Its
#                       tests need no build tag: plain `go test ./...` (make gotest) runs them.
#   make plugins-test   vet, staticcheck and the race-enabled tests of the backends, against real whisper.cpp
#                       and the weightless test models in ../shared (part of make test, which runs deps first)
#   make plugins-bench  the overhead benchmark: jfk.wav through the Go bindings in-process vs an exec'ed warm
#                       backend over go-plugin gRPC, side by side
#
# `make deb` builds and packages all three backends itself (mk/packaging.mk), with the installed library paths.
.PHONY: plugins plugins-sherpa plugins-test plugins-vet plugins-bench

PLUGIN_PKGS       := ./plugins/whisper/... ./cmd/wsched-backend-whisper/...
PLUGINS_BENCHTIME ?= 10x

# -buildmode=pie as for the daemon (lintian's hardening check); mkdeb strips it when packaging.
plugins: whisper-deps
	$(WHISPER_GO_ENV) $(GO) build -trimpath -buildmode=pie -tags $(WHISPER_GO_TAGS) \
		-ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/wsched-backend-whisper
	$(GO) build -trimpath -buildmode=pie -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/wsched-backend-exec

# The sherpa-onnx backend links the prebuilt libraries inside the Go module (no make deps step).
SHERPA_MODULE  := github.com/k2-fsa/sherpa-onnx-go-linux
SHERPA_LIB_DIR  = $(shell $(GO) list -m -f '{{.Dir}}' $(SHERPA_MODULE))/lib/$(shell uname -m)-unknown-linux-gnu

plugins: plugins-sherpa

plugins-sherpa:
	$(GO) mod download $(SHERPA_MODULE)
	CGO_LDFLAGS='-Wl,-rpath,$$ORIGIN' $(GO) build -trimpath -buildmode=pie \
		-ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/wsched-backend-sherpa
	install -m 0644 $(SHERPA_LIB_DIR)/libsherpa-onnx-c-api.so $(SHERPA_LIB_DIR)/libonnxruntime.so $(BIN)/

plugins-test: plugins-vet
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "TMPDIR=$$tmp $(GO) test -race -count=1 -tags $(WHISPER_GO_TAGS) $(PLUGIN_PKGS)" && \
	$(WHISPER_GO_ENV) TMPDIR=$$tmp $(GO) test -race -count=1 -tags $(WHISPER_GO_TAGS) $(PLUGIN_PKGS) && \
	left=$$(ls -A "$$tmp") && if [ -n "$$left" ]; then echo "plugins-test: tests left in TMPDIR: $$left"; exit 1; fi

plugins-vet: $(STATICCHECK)
	$(WHISPER_GO_ENV) $(GO) vet -tags $(WHISPER_GO_TAGS) $(PLUGIN_PKGS)
	$(WHISPER_GO_ENV) $(STATICCHECK) -tags $(WHISPER_GO_TAGS) $(PLUGIN_PKGS)

plugins-bench:
	$(WHISPER_GO_ENV) $(GO) test -tags $(WHISPER_GO_TAGS) -run '^$$' -bench Overhead \
		-benchtime $(PLUGINS_BENCHTIME) ./plugins/whisper/

test: plugins-test

# The audio decoder's fuzz target joins `make fuzz` (pure Go: no libwhisper needed).
FUZZ_TARGETS += ./plugins/internal/audio:FuzzDecodeWAV ./plugins/execbackend:FuzzMapAnswer ./plugins/descriptor:FuzzDescriptor
