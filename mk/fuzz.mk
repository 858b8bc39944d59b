# Fuzzing: `make fuzz` runs every fuzz target for FUZZTIME and keeps what it
# found interesting as seed corpus under each package's testdata/fuzz/NAME, so
# plain `go test` replays it. Targets are package:FuzzName.
FUZZTIME ?= 30s
FUZZ_TARGETS ?= \
	./internal/units:FuzzParseBytes \
	./internal/device:FuzzParse \
	./internal/device:FuzzPinFromEnv \
	./daemon/httpapi:FuzzDecodeRequests \
	./daemon/client:FuzzReadSSE \
	./estimator/ggml:FuzzRead \
	./estimator/onnx:FuzzRead \
	./plugins/plugintest:FuzzParseMemory \
	./daemon/store:FuzzDecodeRecord \
	./daemon/store:FuzzDecodeLease \
	./daemon/store:FuzzScanJournal

.PHONY: fuzz
fuzz:
	@set -e; cache=$$($(GO) env GOCACHE)/fuzz; module=$$($(GO) list -m); \
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz: $$pkg $$name ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
		src=$$cache/$$module/$${pkg#./}/$$name; dst=$$pkg/testdata/fuzz/$$name; \
		if [ -d "$$src" ]; then mkdir -p "$$dst"; cp -n "$$src"/* "$$dst"/ 2>/dev/null || true; fi; \
		echo "fuzz: $$dst holds $$(ls "$$dst" 2>/dev/null | wc -l) inputs"; \
	done
