//go:build whisper

package whisper

import (
	"strings"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/whisper/internal/wlog"
)

// memoryReport turns the lines whisper.cpp logged while loading a model into
// the report the host hands to the estimator. Sizes are as printed: 10^6
// bytes per "MB", exact to ±5,000 bytes.
//
//   - model: every weight buffer, "<buffer type> total size" (CPU, CUDA0,
//     CPU_REPACK, …). Not "model size", which counts the tensors read from
//     the file and is 0 for the weightless test models.
//   - kv self/cross/pad: "kv self size" etc. KV self is the one-decoder size
//     allocated at load; whisper_full re-allocates it at (decoders + 2) × when
//     more than one decoder runs (beam search, or best_of when the temperature
//     fallback samples) and logs nothing about it.
//   - compute: "compute buffer (NAME)" by NAME (conv, encode, cross, decode),
//     each including ~1.59 MB of host-side graph metadata.
func memoryReport(lines []logLine) plugins.MemoryReport {
	r := wlog.NewReport()
	for _, l := range lines {
		r.Add(l.text)
	}
	rep := plugins.MemoryReport{
		KVSelfBytes:  r.Sizes["kv_self_size"].Bytes,
		KVCrossBytes: r.Sizes["kv_cross_size"].Bytes,
		KVPadBytes:   r.Sizes["kv_pad_size"].Bytes,
		ComputeBytes: map[string]int64{},
	}
	for name, f := range r.Sizes {
		if strings.HasSuffix(name, "_total_size") {
			rep.ModelBytes += f.Bytes
		}
		if buf, ok := strings.CutPrefix(name, "compute_buffer_"); ok {
			rep.ComputeBytes[buf] = f.Bytes
		}
	}
	rep.TotalBytes = rep.Sum()
	return rep
}

// streamReport is memoryReport of a state's lines alone (whisper_init_state:
// KV caches and compute buffers): one stream's own memory, no weights.
func streamReport(lines []logLine) plugins.MemoryReport {
	r := memoryReport(lines)
	r.TotalBytes -= r.ModelBytes
	r.ModelBytes = 0
	return r
}

// lastError is the last error-level line, for messages; "" when none.
func lastError(lines []logLine) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].level == levelError {
			return strings.TrimSpace(lines[i].text)
		}
	}
	return ""
}
