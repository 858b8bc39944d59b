package host

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
)

// probe is a cached Info answer for one version of a binary.
type probe struct {
	stamp fileStamp
	info  plugins.Info
	err   string
}

// Status is what the host knows: its directories, the backends found (with
// their Info), the files refused, and the instances.
type Status struct {
	Dirs      []string
	Backends  []BackendStatus
	Refused   []Refused
	Instances []InstanceStatus
}

// BackendStatus is one discovered backend.
type BackendStatus struct {
	Name string
	Path string
	Info plugins.Info // zero when Err is set
	Err  string       // why the Info probe failed
	// Descriptor is the backend's own, or one made of its Info; zero when
	// Err is set.
	Descriptor descriptor.Descriptor
}

// InstanceStatus is one instance as Status shows it.
type InstanceStatus struct {
	ID         string
	Backend    string
	Model      string
	State      State
	Lease      string
	GPU        string // UUID, or "cpu"
	GPUIndex   int    // -1 for cpu
	PID        int
	LeaseBytes int64 // its size now: the first stream's and one per stream added
	// Streams is how many callers it serves now, MaxStreams the most it
	// takes and PeakStreams the most it has served at once (issue 26).
	Streams, MaxStreams, PeakStreams int
	Memory                           plugins.MemoryReport // the backend's own report
	Info                             plugins.Info         // what the running process said at start
	Started                          time.Time
	LastUsed                         time.Time
	Idle                             time.Duration // how long it has been idle (0 unless idle)
	KeepAlive                        time.Duration
	Restarts                         int
	Failed                           string // why it was given up
}

// scan runs discovery and logs each newly refused file once.
func (h *Host) scan() ([]Binary, []Refused) {
	found, refused := Scan(h.dirs, h.uid)
	var fresh []Refused
	h.mu.Lock()
	logged := make(map[string]string, len(refused))
	for _, r := range refused {
		if h.logged[r.Path] != r.Reason {
			fresh = append(fresh, r)
		}
		logged[r.Path] = r.Reason
	}
	h.logged = logged
	h.mu.Unlock()
	for _, r := range fresh {
		h.log.Warn("refusing backend", "path", r.Path, "reason", r.Reason)
	}
	return found, refused
}

// Status scans the directories, asks each backend not seen before (or
// changed since) for its Info, and lists the instances.
func (h *Host) Status(ctx context.Context) (Status, error) {
	found, refused := h.scan()
	st := Status{Dirs: h.dirs, Refused: refused, Backends: []BackendStatus{}, Instances: h.instances()}
	for _, b := range found {
		info, err := h.infoOf(ctx, b)
		if ctx.Err() != nil {
			return Status{}, fmt.Errorf("host: status: %w", ctx.Err())
		}
		bs := BackendStatus{Name: b.Name, Path: b.Path, Info: info, Err: err}
		if err == "" {
			bs.Descriptor = describe(b, info)
		}
		st.Backends = append(st.Backends, bs)
	}
	return st, nil
}

// instances lists the instances, oldest first.
func (h *Host) instances() []InstanceStatus {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]InstanceStatus, 0, len(h.workers))
	for _, w := range h.workers {
		s := InstanceStatus{
			ID: w.id, Backend: w.bin.Name, Model: w.spec.Load.ModelPath, State: w.state, Lease: w.lease.ID,
			GPU: w.lease.GPU, GPUIndex: w.lease.GPUIndex, LeaseBytes: w.bytes, Memory: w.memory,
			Streams: w.streams, MaxStreams: w.maxStreams, PeakStreams: w.peakStreams,
			Started: w.started, LastUsed: w.lastUsed, KeepAlive: w.keepAlive, Restarts: w.restarts, Info: w.info,
		}
		if w.proc != nil {
			s.PID = w.proc.pid
		}
		if w.state == StateIdle {
			s.Idle = now.Sub(w.lastUsed)
		}
		if w.failed != nil {
			s.Failed = w.failed.Error()
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b InstanceStatus) int {
		return cmp.Or(a.Started.Compare(b.Started), strings.Compare(a.ID, b.ID))
	})
	return out
}

// infoOf returns b's Info, from the cache while the file is unchanged.
func (h *Host) infoOf(ctx context.Context, b Binary) (plugins.Info, string) {
	h.mu.Lock()
	p, ok := h.probes[b.Path]
	h.mu.Unlock()
	if ok && p.stamp == b.stamp {
		return p.info, p.err
	}
	env := append(h.opts.Environ(), "CUDA_VISIBLE_DEVICES=")
	info, err := probeInfo(ctx, b.Path, env, h.log.With("backend", b.Name), h.opts.Config.StartTimeout.D())
	p = probe{stamp: b.stamp, info: info}
	if err != nil {
		p.err = err.Error()
		h.log.Warn("backend does not answer Info", "backend", b.Name, "path", b.Path, "err", err)
	}
	if ctx.Err() == nil {
		h.mu.Lock()
		h.probes[b.Path] = p
		h.mu.Unlock()
	}
	return p.info, p.err
}

// probeInfo starts the binary at path, asks for Info and stops it.
func probeInfo(ctx context.Context, path string, env []string, log *slog.Logger, timeout time.Duration) (plugins.Info, error) {
	p, err := startProcess(ctx, path, env, log, timeout, nil)
	if err != nil {
		return plugins.Info{}, err
	}
	defer p.kill()
	info, err := p.backend.Info(ctx)
	if err != nil {
		return plugins.Info{}, fmt.Errorf("info: %w", err)
	}
	return info, nil
}

// CheckResult is what Check found out about a backend binary.
type CheckResult struct {
	Path string `json:"path"`
	// Name is NAME from the file name wsched-backend-NAME ("" when the file
	// is not named like a backend).
	Name string `json:"name,omitempty"`
	// Refusal says why discovery would refuse the file for a daemon
	// running as the current user ("" when it would run it).
	Refusal string       `json:"refusal,omitempty"`
	Info    plugins.Info `json:"info"`
	// Startup is how long the start, handshake and Info took.
	Startup time.Duration `json:"startup_ns"`
}

// Check runs the go-plugin handshake (with AutoMTLS) and Info against the
// binary at path, without a daemon or a lease (CUDA_VISIBLE_DEVICES=""),
// and says whether discovery would accept the file.
func Check(ctx context.Context, path string, log *slog.Logger, timeout time.Duration) (CheckResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return CheckResult{}, fmt.Errorf("check %s: %w", path, err)
	}
	res := CheckResult{Path: abs}
	file := filepath.Base(abs)
	if name, ok := strings.CutPrefix(file, BinaryPrefix); ok && validName(name) {
		res.Name = name
	} else {
		res.Refusal = fmt.Sprintf("file name %q is not %sNAME", file, BinaryPrefix)
	}
	if _, reason := checkFile(abs, os.Geteuid()); reason != "" {
		res.Refusal = strings.TrimPrefix(res.Refusal+"; "+reason, "; ")
	}
	start := time.Now()
	res.Info, err = probeInfo(ctx, abs, append(os.Environ(), "CUDA_VISIBLE_DEVICES="), log, timeout)
	res.Startup = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("check %s: %w", abs, err)
	}
	return res, nil
}
