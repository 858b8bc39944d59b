# estimator: ggml header reader and memory profiles.
.PHONY: estimator-test estimator-fuzz
estimator-test:
	$(GO) test -race ./estimator/...

# Grow the kept corpus: new interesting inputs land in Go's fuzz cache; copy
# small ones into estimator/ggml/testdata/fuzz/FuzzRead to keep them.
estimator-fuzz:
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 60s ./estimator/ggml

test: estimator-test
