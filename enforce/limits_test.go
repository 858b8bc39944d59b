package enforce

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/nvmllimits/fakenvml"
	"github.com/wsched/wsched/internal/cgroup"
	"github.com/wsched/wsched/placement"
)

// The nvml-limits tier on the fake NVML library and a real cgroup: soft =
// lease and hard = lease + borrow are set when the holder's cgroup is
// attached (grant), set again when the lease is resized, and cleared (soft
// 0, hard unlimited) while the cgroup still exists, before it is removed.
func TestLimitsFollowLease(t *testing.T) {
	dir := t.TempDir()
	lib, err := fakenvml.Build("", dir, true)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "calls")
	t.Setenv(fakenvml.LogEnv, logPath)
	nv, err := nvmllimits.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer nv.Close()
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-limits-test-%d", os.Getpid()))
	if err != nil {
		t.Skipf("no writable cgroup hierarchy: %v", err)
	}
	defer m.Close()
	g, err := m.New("holder")
	if err != nil {
		t.Fatal(err)
	}
	const borrow = 1 << 30
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := make(chan placement.Event)
	lim := NewLimits(nv, borrow, slog.New(slog.DiscardHandler))
	ran := make(chan struct{})
	go func() { lim.Run(ctx, events); close(ran) }()

	lease := placement.Lease{ID: "l1", GPU: "GPU-1111", Bytes: 2 << 30}
	g.OnRemove(lim.Attach(lease, g.Dir()))
	resized := lease
	resized.Bytes = 3 << 30
	for _, ev := range []placement.Event{
		{Type: placement.EventRenewed, Lease: lease},
		{Type: placement.EventResized, Lease: resized},
		{Type: placement.EventResized, Lease: placement.Lease{ID: "other", GPU: "GPU-1111", Bytes: 5}},
	} {
		select {
		case events <- ev:
		case <-ctx.Done():
			t.Fatal("Run does not take events")
		}
	}
	if err := g.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.Dir()); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there: %v", g.Dir(), err)
	}
	cancel()
	<-ran
	calls, err := fakenvml.Calls(logPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"init",
		fmt.Sprintf("set GPU-1111 %s %d %d", g.Dir(), 2<<30, 3<<30),
		fmt.Sprintf("set GPU-1111 %s %d %d", g.Dir(), 3<<30, 4<<30),
		fmt.Sprintf("set GPU-1111 %s 0 %d", g.Dir(), uint64(nvmllimits.Unlimited)),
	}
	if !slices.Equal(calls, want) {
		t.Errorf("NVML calls:\n%q\nwant\n%q", calls, want)
	}
}

// A CPU lease attaches nothing, and Attach after Run has ended does not
// block.
func TestLimitsCPUAndStopped(t *testing.T) {
	rec := &recSetter{}
	lim := NewLimits(rec, 0, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { lim.Run(ctx, nil); close(ran) }()
	lim.Attach(placement.Lease{ID: "c", GPU: placement.CPU, Bytes: 1}, "/x")()
	cancel()
	<-ran
	done := make(chan struct{})
	go func() { lim.Attach(placement.Lease{ID: "g", GPU: "GPU-1", Bytes: 1}, "/y")(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Attach blocks after Run ended")
	}
	if len(rec.calls) != 0 {
		t.Errorf("calls %q, want none", rec.calls)
	}
}

type recSetter struct{ calls []string }

func (r *recSetter) Set(uuid, dir string, soft, hard uint64) error {
	r.calls = append(r.calls, fmt.Sprint("set", uuid, dir, soft, hard))
	return nil
}

func (r *recSetter) Clear(uuid, dir string) error { return r.Set(uuid, dir, 0, 0) }

// A lease that ends (released, expired) has its limits cleared on the
// cgroups still there; a removed one took its limits with it.
func TestLimitsClearedOnRelease(t *testing.T) {
	rec := &recSetter{}
	lim := NewLimits(rec, 0, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := make(chan placement.Event)
	ran := make(chan struct{})
	go func() { lim.Run(ctx, events); close(ran) }()
	kept, gone := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	l := placement.Lease{ID: "l", GPU: "GPU-1", Bytes: 10}
	lim.Attach(l, kept)
	lim.Attach(l, gone)
	for _, ev := range []placement.Event{{Type: placement.EventReleased, Lease: l}, {Type: placement.EventResized, Lease: l}} {
		select {
		case events <- ev:
		case <-ctx.Done():
			t.Fatal("Run does not take events")
		}
	}
	cancel()
	<-ran
	want := []string{fmt.Sprint("set", "GPU-1", kept, 10, 10), fmt.Sprint("set", "GPU-1", gone, 10, 10), fmt.Sprint("set", "GPU-1", kept, 0, 0)}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls %q, want %q", rec.calls, want)
	}
}
