# wsched — see README.md. Area-specific targets live in mk/*.mk.
GO          ?= go
BIN         ?= bin
STATICCHECK_VERSION ?= 2026.1
export CGO_ENABLED ?= 1

.PHONY: all build test run vet staticcheck gotest fmt-check
all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/wsched

-include mk/*.mk
