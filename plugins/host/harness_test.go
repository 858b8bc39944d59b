package host

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/simtest"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
)

const GiB = units.GiB

// fakeBinary is the fake backend, built once for the package's tests.
var fakeBinary string

func TestMain(m *testing.M) {
	if path := os.Getenv(orphanEnv); path != "" {
		os.Exit(orphanChild(path))
	}
	os.Exit(testtmp.Run(func() int { return runTests(m) }))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "wsched-host-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fakeBinary = filepath.Join(dir, plugintest.FakeBinaryName)
	if out, err := exec.Command("go", "build", "-o", fakeBinary, plugintest.FakePackage).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build fake backend: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// installFake puts the fake backend into dir under the given file name,
// with mode perm.
func installFake(t *testing.T, dir, name string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if perm == 0o755 && os.Link(fakeBinary, path) == nil {
		return path
	}
	src, err := os.Open(fakeBinary)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o700)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

// rig is a host over a placement engine on simulated GPUs, both running.
type rig struct {
	t       *testing.T
	eng     *placement.Engine
	sim     *inventory.Sim
	h       *Host
	dir     string // the plugin directory
	logs    *syncBuffer
	events  chan Event
	stop    context.CancelFunc
	stopped chan struct{}
}

type rigOption func(*config.Backends, *Options)

// newRig starts an engine on GPUs of the given sizes and a host whose
// plugin directory holds the fake backend.
func newRig(t *testing.T, gpuSizes []int64, opts ...rigOption) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), logs: &syncBuffer{}, events: make(chan Event, 256), stopped: make(chan struct{})}
	r.eng, r.sim = simtest.Engine(t, simtest.GPUs(gpuSizes...), func(o *placement.Options) {
		o.Placement.Reserved, o.Placement.SafetyFactor = 0, 1
	})

	installFake(t, r.dir, plugintest.FakeBinaryName, 0o755)
	bc := config.Defaults().Backends
	bc.PluginDir, bc.DevDirs = r.dir, nil
	o := Options{Leases: r.eng, Log: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnEvent: func(ev Event) { r.events <- ev }}
	for _, f := range opts {
		f(&bc, &o)
	}
	o.Config = bc
	r.h = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { _ = r.h.Run(ctx); close(r.stopped) }()
	t.Cleanup(func() {
		cancel()
		<-r.stopped
		if t.Failed() {
			t.Logf("host log:\n%s", r.logs.String())
		}
	})
	return r
}

// spec is a spec for the fake backend with a fresh model file.
func (r *rig) spec(model string, bytes int64) Spec {
	return Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: testshared.Touch(r.t, model)}, MemoryBytes: bytes}
}

// acquire gets an instance or fails the test.
func (r *rig) acquire(spec Spec) (*Instance, func()) {
	r.t.Helper()
	inst, release, err := r.h.Acquire(r.t.Context(), spec)
	if err != nil {
		r.t.Fatalf("Acquire(%s): %v", spec.Load.ModelPath, err)
	}
	return inst, release
}

// waitEvent reads events until one of type typ for which match holds.
func (r *rig) waitEvent(typ EventType, match func(Event) bool) Event {
	r.t.Helper()
	deadline := time.NewTimer(60 * time.Second) // a hang, not a timing assertion
	defer deadline.Stop()
	for {
		select {
		case ev := <-r.events:
			if ev.Type == typ && (match == nil || match(ev)) {
				return ev
			}
		case <-deadline.C:
			r.t.Fatalf("no %s event came", typ)
		}
	}
}

// leases returns the engine's granted leases.
func (r *rig) leases() []placement.Lease {
	r.t.Helper()
	v := r.eng.View()
	out := slices.Clone(v.CPU)
	for _, g := range v.GPUs {
		out = append(out, g.Leases...)
	}
	return out
}

// lease returns one lease by ID, ended ones too.
func (r *rig) lease(id string) placement.Lease {
	r.t.Helper()
	l, err := r.eng.Get(r.t.Context(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return l
}

// logLines returns the log lines that contain every one of parts.
func (r *rig) logLines(parts ...string) []string {
	var out []string
	for line := range strings.SplitSeq(r.logs.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok && line != "" {
			out = append(out, line)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer = testshared.SyncBuffer
