# Issue 26: length-aware order and `wsched sim`.
FUZZ_TARGETS += ./jobs:FuzzWAVDuration
