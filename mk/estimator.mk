# estimator: ggml header reader and memory profiles. Its tests run in the
# top-level `make test` (go test -race ./...); this fragment adds the fuzzer.
.PHONY: estimator-fuzz

# Grow the kept corpus: new interesting inputs land in Go's fuzz cache; copy
# small ones into estimator/ggml/testdata/fuzz/FuzzRead to keep them.
estimator-fuzz:
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 60s ./estimator/ggml
