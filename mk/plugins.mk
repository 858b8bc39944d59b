# plugins: backend SDK (plugins/), its fake backend (plugins/plugintest).
# The exec smoke test builds the fake with `go build`, so `go` must be on PATH.
.PHONY: plugins-fuzz
# Grow the kept corpus: copy new inputs from Go's fuzz cache into
# plugins/plugintest/testdata/fuzz/FuzzParseMemory to keep them.
plugins-fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseMemory -fuzztime 60s ./plugins/plugintest

