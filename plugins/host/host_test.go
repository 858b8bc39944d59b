package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestRefusesWorldWritableBackend: a world-writable plugin file is refused
// with one log line naming it and the reason; the good one next to it is
// found and answers Info.
func TestRefusesWorldWritableBackend(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	evil := installFake(t, r.dir, "wsched-backend-evil", 0o777)
	st, err := r.h.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.h.Status(t.Context()); err != nil { // a second scan must not log again
		t.Fatal(err)
	}
	if len(st.Backends) != 1 || st.Backends[0].Name != "fake" || st.Backends[0].Info.Version != "0.0.0-test" || st.Backends[0].Err != "" {
		t.Errorf("backends = %+v, want the fake with its Info", st.Backends)
	}
	if want := []Refused{{Path: evil, Reason: "world-writable (mode 0777)"}}; !slices.Equal(st.Refused, want) {
		t.Errorf("refused = %+v, want %+v", st.Refused, want)
	}
	lines := r.logLines(`msg="refusing backend"`, "path="+evil, `reason="world-writable (mode 0777)"`)
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") {
		t.Errorf("want one WARN line refusing %s, got %q in:\n%s", evil, lines, r.logs)
	}
	_, _, err = r.h.Acquire(t.Context(), Spec{Backend: "evil", Load: plugins.LoadRequest{ModelPath: testshared.Touch(t, "m.bin")}, MemoryBytes: GiB})
	if !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("Acquire of the refused backend: %v, want ErrUnknownBackend", err)
	}
	if env := st.Backends[0].Info.Metadata["env.CUDA_VISIBLE_DEVICES"]; env != "" {
		t.Errorf("the Info probe saw CUDA_VISIBLE_DEVICES=%q, want it empty (no GPU)", env)
	}
}

// TestInstanceRunsUnderItsLease: the backend sees exactly its lease's GPU,
// its PID counts against the lease, its report reaches the caller, its log
// lines are tagged, and a released instance is reused warm.
func TestInstanceRunsUnderItsLease(t *testing.T) {
	r := newRig(t, []int64{8 * GiB, 8 * GiB})
	t.Setenv("CUDA_VISIBLE_DEVICES", "GPU-the-daemons-own") // must not reach the backend
	spec := r.spec("model.bin", 2*GiB)
	spec.Load.Extra = map[string]string{plugintest.Memory: "model=1000,kv_self=200,compute.encode=4"}
	spec.Labels = map[string]string{"job": "j1"}
	inst, release := r.acquire(spec)

	l := inst.Lease()
	if l.GPU != inventory.SimUUID(0) && l.GPU != inventory.SimUUID(1) || l.Bytes != 2*GiB {
		t.Fatalf("lease = %+v, want 2 GiB on a simulated GPU", l)
	}
	meta := inst.Info().Metadata
	for k, want := range map[string]string{
		"env.CUDA_VISIBLE_DEVICES": l.GPU, "env.CUDA_DEVICE_ORDER": "PCI_BUS_ID", "env.SENSEVOICE_DEVICE": "cuda:0",
		"device": "cuda:0", "model": spec.Load.ModelPath, "mtls": "true", "pid": fmt.Sprint(inst.PID()),
	} {
		if meta[k] != want {
			t.Errorf("backend metadata %s = %q, want %q", k, meta[k], want)
		}
	}
	el := r.lease(l.ID)
	if !slices.Contains(el.PIDs, inst.PID()) || el.Holder.PID != os.Getpid() || el.Holder.Name != "wsched-backend-fake" ||
		el.Labels[LabelBackend] != "fake" || el.Labels[LabelModel] != spec.Load.ModelPath || el.Labels["job"] != "j1" {
		t.Errorf("engine lease = %+v; want backend pid %d registered, held by this process, labelled", el, inst.PID())
	}
	if m := inst.Memory(); m.ModelBytes != 1000 || m.KVSelfBytes != 200 || m.ComputeBytes["encode"] != 4 || m.TotalBytes != 1204 {
		t.Errorf("memory report = %+v", m)
	}

	var segs int
	res, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: testshared.Touch(t, "a.wav")}, func(ev plugins.Event) error {
		if ev.Kind == plugins.EventSegment {
			segs++
		}
		return nil
	})
	if err != nil || segs != 3 || res.Text != "segment 0 segment 1 segment 2" {
		t.Fatalf("Transcribe = %+v, %v after %d segment events", res, err, segs)
	}
	if lines := r.logLines(`msg="loaded model"`, "backend=fake", "lease="+l.ID, "logger=wsched-backend-fake"); len(lines) != 1 {
		t.Errorf("backend log line not mirrored with its tags:\n%s", r.logs)
	}

	pid := inst.PID()
	release()
	release() // a second call does nothing
	if _, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: "/x"}, nil); !errors.Is(err, ErrReleased) {
		t.Errorf("Transcribe after release: %v, want ErrReleased", err)
	}
	st, _ := r.h.Status(t.Context())
	if len(st.Instances) != 1 || st.Instances[0].State != StateIdle || st.Instances[0].PID != pid || st.Instances[0].Lease != l.ID {
		t.Errorf("instances after release = %+v, want one idle", st.Instances)
	}

	again, release2 := r.acquire(spec)
	if again.PID() != pid || again.Lease().ID != l.ID {
		t.Errorf("warm reuse: pid %d lease %s, want %d %s", again.PID(), again.Lease().ID, pid, l.ID)
	}
	other, release3 := r.acquire(r.spec("other.bin", 2*GiB))
	if other.PID() == pid || other.Lease().ID == l.ID {
		t.Error("another model reused the first instance")
	}
	release2()
	release3()
	if n := len(r.leases()); n != 2 {
		t.Errorf("%d leases held, want 2 warm instances", n)
	}
}

// TestKeepAliveExpiryReleasesLease: an idle instance past its keep-alive
// is stopped and its lease released.
func TestKeepAliveExpiryReleasesLease(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	spec := r.spec("model.bin", GiB)
	spec.KeepAlive = 50 * time.Millisecond
	inst, release := r.acquire(spec)
	id, pid := inst.Lease().ID, inst.PID()
	release()
	ev := r.waitEvent(EventStopped, nil)
	if ev.Lease != id || ev.Reason != "keep-alive expired" || ev.PID != pid {
		t.Errorf("stopped event = %+v", ev)
	}
	if l := r.lease(id); l.State != placement.StateReleased || l.Reason != "keep-alive expired" {
		t.Errorf("lease after keep-alive: %s (%s)", l.State, l.Reason)
	}
	if ls := r.leases(); len(ls) != 0 {
		t.Errorf("leases left: %+v", ls)
	}
	if err := processAlive(pid); err == nil {
		t.Errorf("backend process %d still runs", pid)
	}
}

// TestEvictsLeastRecentlyUsed: when a load does not fit, idle instances go
// least recently used first, just enough of them.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	a, b := r.spec("a.bin", 3*GiB), r.spec("b.bin", 3*GiB)
	instA, relA := r.acquire(a)
	instB, relB := r.acquire(b)
	relB()
	relA() // A used last
	again, relB2 := r.acquire(b)
	relB2() // now B used last: A is least recently used
	if again.PID() != instB.PID() {
		t.Fatal("B was not reused warm")
	}
	c, relC := r.acquire(r.spec("c.bin", 3*GiB))
	defer relC()
	ev := r.waitEvent(EventStopped, nil)
	if ev.Lease != instA.Lease().ID || !strings.HasPrefix(ev.Reason, "evicted") {
		t.Errorf("evicted %s (%s), want A's lease %s", ev.Lease, ev.Reason, instA.Lease().ID)
	}
	var held []string
	for _, l := range r.leases() {
		held = append(held, l.ID)
	}
	slices.Sort(held)
	want := []string{instB.Lease().ID, c.Lease().ID}
	slices.Sort(want)
	if !slices.Equal(held, want) {
		t.Errorf("leases held = %v, want B's and C's %v", held, want)
	}
}

// TestEvictionOnlyWherePinned: an idle instance on another GPU than the one
// a request pins is not evicted; without anything to evict the request fails
// with ErrNoFit.
func TestEvictionOnlyWherePinned(t *testing.T) {
	r := newRig(t, []int64{4 * GiB, 4 * GiB})
	a := r.spec("a.bin", 3*GiB)
	a.Device = device.Spec{Kind: device.Index, Index: 1}
	instA, relA := r.acquire(a)
	relA()
	b := r.spec("b.bin", 3*GiB)
	b.Device = device.Spec{Kind: device.Index, Index: 1}
	c := b
	c.Load.ModelPath = testshared.Touch(t, "c.bin")
	inst, relB := r.acquire(b) // evicts A on GPU 1
	if inst.Lease().GPUIndex != 1 {
		t.Fatalf("pinned to GPU 1, got %d", inst.Lease().GPUIndex)
	}
	relB()
	if ev := r.waitEvent(EventStopped, nil); ev.Lease != instA.Lease().ID {
		t.Errorf("evicted %s, want A", ev.Lease)
	}
	d := r.spec("d.bin", 3*GiB)
	d.Device = device.Spec{Kind: device.Index, Index: 0}
	instD, relD := r.acquire(d) // fits on GPU 0: B stays
	defer relD()
	c.Load.Extra = map[string]string{"x": "y"}
	busy, relBusy := r.acquire(b) // B again, now busy
	defer relBusy()
	_, _, err := r.h.Acquire(t.Context(), c) // GPU 1 holds busy B only
	if !errors.Is(err, placement.ErrNoFit) {
		t.Errorf("pinned load with nothing idle to evict: %v, want ErrNoFit", err)
	}
	if instD.Lease().GPUIndex != 0 || busy.Lease().ID != inst.Lease().ID {
		t.Error("wrong instances")
	}
}

// TestWaitingLoadTakesOrEvictsFreedInstance: a load that waits for memory
// takes a freed instance of its own spec, and evicts a freed instance of
// another spec instead of waiting for its keep-alive.
func TestWaitingLoadTakesOrEvictsFreedInstance(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	queued, cancel, err := r.eng.Subscribe(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	waitQueued := func() {
		t.Helper()
		for ev := range queued {
			if ev.Type == placement.EventQueued {
				return
			}
		}
		t.Fatal("event stream ended")
	}
	type got struct {
		inst    *Instance
		release func()
		err     error
	}
	acquireAsync := func(s Spec) chan got {
		ch := make(chan got, 1)
		go func() { i, rel, err := r.h.Acquire(t.Context(), s); ch <- got{i, rel, err} }()
		return ch
	}

	a := r.spec("a.bin", 6*GiB)
	a.Wait = time.Minute
	instA, relA := r.acquire(a)
	sameCh := acquireAsync(a)
	waitQueued()
	relA()
	same := <-sameCh
	if same.err != nil || same.inst.PID() != instA.PID() {
		t.Fatalf("waiting load of the same spec: %v; want A's instance back", same.err)
	}
	if ls := r.leases(); len(ls) != 1 {
		t.Errorf("%d leases after the waiter took the warm instance, want 1 (its queued request withdrawn)", len(ls))
	}

	b := r.spec("b.bin", 6*GiB)
	b.Wait = time.Minute
	otherCh := acquireAsync(b)
	waitQueued()
	same.release()
	other := <-otherCh
	if other.err != nil {
		t.Fatal(other.err)
	}
	defer other.release()
	if l := r.lease(instA.Lease().ID); l.State != placement.StateReleased || !strings.HasPrefix(l.Reason, "evicted (idle)") {
		t.Errorf("A's lease: %s (%s), want released by eviction", l.State, l.Reason)
	}
}

func TestSpecValidation(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	model := testshared.Touch(t, "m.bin")
	tests := []struct {
		name string
		spec Spec
		err  error
	}{
		{"no backend", Spec{Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: GiB}, ErrInvalid},
		{"bad name", Spec{Backend: "../fake", Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: GiB}, ErrInvalid},
		{"relative model", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: "m.bin"}, MemoryBytes: GiB}, ErrInvalid},
		{"no memory", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model}}, ErrInvalid},
		{"negative wait", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: GiB, Wait: -1}, ErrInvalid},
		{"unknown backend", Spec{Backend: "nope", Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: GiB}, ErrUnknownBackend},
		{"too large", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model}, MemoryBytes: 9 * GiB}, placement.ErrTooLarge},
		{"missing model", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model + ".gone"}, MemoryBytes: GiB}, plugins.ErrModelNotFound},
		{"load fails oom", Spec{Backend: "fake", Load: plugins.LoadRequest{ModelPath: model, Extra: map[string]string{plugintest.LoadError: "oom"}}, MemoryBytes: GiB}, plugins.ErrOutOfMemory},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, release, err := r.h.Acquire(t.Context(), tt.spec)
			if !errors.Is(err, tt.err) || inst != nil || release != nil {
				t.Errorf("Acquire = %v, %v; want %v", inst, err, tt.err)
			}
			if ls := r.leases(); len(ls) != 0 {
				t.Errorf("a failed Acquire left leases: %+v", ls)
			}
		})
	}
}

// TestCPUInstance: a CPU lease hides every GPU from the backend.
func TestCPUInstance(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	spec := r.spec("m.bin", 0)
	spec.Device = device.Spec{Kind: device.CPU}
	inst, release := r.acquire(spec)
	defer release()
	meta := inst.Info().Metadata
	if inst.Lease().GPU != placement.CPU || meta["device"] != "cpu" || meta["env.CUDA_VISIBLE_DEVICES"] != "" || meta["env.SENSEVOICE_DEVICE"] != "cpu" {
		t.Errorf("CPU instance: lease GPU %q, metadata %v", inst.Lease().GPU, meta)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := installFake(t, dir, "wsched-backend-fake", 0o755)
	res, err := Check(t.Context(), good, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.Name != "fake" || res.Info.Name != "fake" || res.Refusal != "" || res.Path != good || res.Startup <= 0 {
		t.Errorf("Check(good) = %+v", res)
	}
	bad := installFake(t, dir, "fake-copy", 0o777)
	res, err = Check(t.Context(), bad, nil, time.Minute)
	if err != nil || res.Info.Name != "fake" {
		t.Fatalf("Check(bad) = %+v, %v; want the handshake to work", res, err)
	}
	if want := `file name "fake-copy" is not wsched-backend-NAME; world-writable (mode 0777)`; res.Refusal != want {
		t.Errorf("refusal = %q, want %q", res.Refusal, want)
	}
	script := filepath.Join(dir, "wsched-backend-script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho not a plugin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(t.Context(), script, nil, 5*time.Second); err == nil {
		t.Error("Check of a non-plugin succeeded")
	}
}

// processAlive returns nil while pid runs.
func processAlive(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(syscall.Signal(0))
}

// TestOutsideRequestReclaimsIdleBackend: a lease request that is not the
// host's own (wsched lease, wsched run) gets the memory of an idle backend:
// the engine asks it back and the host stops it, instead of the request
// failing while the backend waits out its keep-alive.
func TestOutsideRequestReclaimsIdleBackend(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	inst, rel := r.acquire(r.spec("a.bin", 6*GiB))
	id := inst.Lease().ID
	rel() // idle, kept warm
	outside := placement.Request{Bytes: 4 * GiB, Holder: placement.Holder{PID: os.Getpid(), UID: os.Getuid()}}
	l, err := r.eng.Acquire(t.Context(), outside) // no wait of its own
	if err != nil {
		t.Fatalf("outside request with an idle backend in the way: %v", err)
	}
	if ev := r.waitEvent(EventStopped, nil); ev.Lease != id || !strings.HasPrefix(ev.Reason, "evicted (idle)") {
		t.Errorf("stopped %s (%s), want the idle backend's lease %s evicted", ev.Lease, ev.Reason, id)
	}
	if l.State != placement.StateGranted {
		t.Errorf("outside lease %s, want granted", l.State)
	}
}
