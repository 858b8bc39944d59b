# Issue 26: length-aware order and `wsched sim`. The fuzz targets join
# `make fuzz`; `make sim` prints the policies side by side on the built-in
# mixed workload with the ratio line against the targets (SIMFLAGS adds
# flags, e.g. SIMFLAGS="--seed 2 --json").
FUZZ_TARGETS += ./jobs:FuzzWAVDuration
FUZZ_TARGETS += ./sim:FuzzReadWorkload
FUZZ_TARGETS += ./sim:FuzzReadTrace
SIMFLAGS ?=

.PHONY: sim
sim:
	$(GO) run ./cmd/wsched sim $(SIMFLAGS)
