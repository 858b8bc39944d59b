package plugins

import (
	"math"
	"regexp"
	"strconv"
)

// failedAllocation matches the sizes ggml logs when an allocation fails:
// ggml-cuda's "allocating 3094.36 MiB on device 0: cudaMalloc failed" and
// ggml-alloc's "failed to allocate CUDA0 buffer of size 3244672000".
var failedAllocation = regexp.MustCompile(`allocating ([0-9]+(?:\.[0-9]+)?) MiB on device|buffer of size ([0-9]+)`)

// FailedAllocationBytes is the size of the allocation an out-of-memory
// error's text names (the ggml log line a backend quotes), or 0 when it
// names none. The job runner adds it to what the next attempt asks for.
func FailedAllocationBytes(msg string) int64 {
	var most int64
	for _, m := range failedAllocation.FindAllStringSubmatch(msg, -1) {
		var b float64
		if m[1] != "" {
			mib, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				continue
			}
			b = math.Ceil(mib * (1 << 20))
		} else {
			n, err := strconv.ParseUint(m[2], 10, 63)
			if err != nil {
				continue
			}
			b = float64(n)
		}
		if b > 0 && b < 1<<50 { // above a PiB is not a GPU allocation
			most = max(most, int64(b))
		}
	}
	return most
}
