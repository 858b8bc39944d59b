package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/units"
)

// leaseFlags mirror the fields of POST /v1/leases.
type leaseFlags struct {
	memory, model, precision, backend string
	segment                           time.Duration
	batch, beam                       int
	device, priority                  string
	ttl, wait                         time.Duration
	holderPID                         int
	name                              string
	labels                            []string
}

func (f *leaseFlags) register(fs *pflag.FlagSet, waitDefault time.Duration) {
	fs.StringVar(&f.memory, "memory", "", `GPU memory to lease, e.g. "4GiB" (memory_bytes)`)
	fs.StringVar(&f.model, "model", "", "size the lease by the estimator for this model instead (e.g. medium, large-v3)")
	fs.StringVar(&f.precision, "precision", "", "with --model: precision (f16, f32, q5_0, int8, …)")
	fs.StringVar(&f.backend, "backend", "", "with --model: memory profile: whisper.cpp, pytorch, faster-whisper, seed")
	fs.DurationVar(&f.segment, "segment", 0, "with --model: audio segment length (e.g. 30s)")
	fs.IntVar(&f.batch, "batch", 0, "with --model: batch size")
	fs.IntVar(&f.beam, "beam", 0, "with --model: beam size")
	fs.StringVar(&f.device, "device", "", "auto, cuda, cuda:N, GPU-<uuid> or cpu (default: $WSCHED_DEVICE, $SENSEVOICE_DEVICE, auto)")
	fs.StringVar(&f.priority, "priority", "normal", "high, normal or low")
	fs.DurationVar(&f.ttl, "ttl", 0, "lease time to live, renewed by --hold and run (default [leases] default_ttl)")
	fs.DurationVar(&f.wait, "wait", waitDefault, "how long to wait in the queue when memory is short")
	fs.IntVar(&f.holderPID, "holder-pid", 0, "process the lease belongs to (must be yours)")
	fs.StringVar(&f.name, "name", "", "holder name shown in listings")
	fs.StringSliceVar(&f.labels, "label", nil, "KEY=VALUE label carried by the lease (repeatable)")
}

func (f *leaseFlags) request() (api.LeaseRequest, error) {
	req := api.LeaseRequest{
		Model: f.model, Precision: f.precision, Backend: f.backend, SegmentSeconds: f.segment.Seconds(),
		BatchSize: f.batch, Beam: f.beam, Device: f.device, Priority: f.priority,
		TTLSeconds: f.ttl.Seconds(), WaitSeconds: f.wait.Seconds(),
	}
	if f.memory != "" {
		n, err := units.ParseBytes(f.memory)
		if err != nil {
			return req, fmt.Errorf("--memory: %w", err)
		}
		if n <= 0 {
			return req, fmt.Errorf("--memory %s: want a size above 0 (leave --memory out for [leases] default_memory)", f.memory)
		}
		req.MemoryBytes = n
	}
	if f.holderPID != 0 || f.name != "" {
		req.Holder = &api.HolderRequest{PID: f.holderPID, Name: f.name}
	}
	for _, kv := range f.labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, fmt.Errorf("--label %q: want KEY=VALUE", kv)
		}
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[k] = v
	}
	return req, nil
}

// exportLines renders a lease's environment as shell export lines.
func exportLines(env map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(env) {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(env[k]))
	}
	return b.String()
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == ':' || r == '/' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
