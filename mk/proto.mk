# Protobuf code generation for the backend plugin protocol.
#
# Sources: proto/ (a buf module). Output: plugins/proto/ (generated code only,
# committed). The tools are pinned and built from source through the Go module
# proxy into .cache/proto-tools/; buf compiles the .proto files itself (no
# protoc) and runs the two Go plugins locally, so nothing but the module proxy
# is contacted.
#
#   make proto        regenerate plugins/proto/
#   make proto-check  lint, regenerate into a temp dir, fail unless it matches
#                     the committed plugins/proto/ byte for byte

BUF_VERSION                ?= v1.70.0
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2

PROTO_TOOLS := $(CURDIR)/.cache/proto-tools/buf-$(BUF_VERSION)_go-$(PROTOC_GEN_GO_VERSION)_grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
PROTO_BUF   := PATH="$(PROTO_TOOLS):$$PATH" $(PROTO_TOOLS)/buf
PROTO_GEN    = $(PROTO_BUF) generate proto --template proto/buf.gen.yaml

.PHONY: proto proto-check proto-tools
proto-tools: $(PROTO_TOOLS)/.ok

$(PROTO_TOOLS)/.ok:
	GOBIN=$(PROTO_TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(PROTO_TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(PROTO_TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	touch $@

proto: proto-tools
	rm -f plugins/proto/*.pb.go
	$(PROTO_GEN)

proto-check: proto-tools
	$(PROTO_BUF) lint proto
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(PROTO_GEN) --output "$$tmp" && \
	if diff -r "$$tmp/plugins/proto" plugins/proto; then \
		echo "proto-check: plugins/proto matches proto/"; \
	else \
		echo "proto-check: plugins/proto is stale or edited; run 'make proto'" >&2; exit 1; \
	fi
