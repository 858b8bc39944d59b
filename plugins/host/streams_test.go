package host

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

const MiB = GiB / 1024

// streamSpec is a spec whose instances serve n streams of 512 MiB each
// over a first stream of 2 GiB.
func (r *rig) streamSpec(model string, n int) Spec {
	s := r.spec(model, 2*GiB)
	s.MaxStreams, s.StreamBytes = n, 512*MiB
	return s
}

// acquireAll acquires spec n times at once and returns the instances and
// their release functions.
func (r *rig) acquireAll(spec Spec, n int) ([]*Instance, []func()) {
	r.t.Helper()
	insts, rels := make([]*Instance, n), make([]func(), n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			insts[i], rels[i], errs[i] = r.h.Acquire(r.t.Context(), spec)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			r.t.Fatalf("Acquire: %v", err)
		}
	}
	return insts, rels
}

// outside takes a lease of bytes on GPU index gpu for another holder.
func (r *rig) outside(gpu int, bytes int64) placement.Lease {
	r.t.Helper()
	l, err := r.eng.Acquire(r.t.Context(), placement.Request{Bytes: bytes, Device: device.Spec{Kind: device.Index, Index: gpu},
		Holder: placement.Holder{PID: os.Getpid(), UID: os.Getuid()}})
	if err != nil {
		r.t.Fatalf("outside lease of %d bytes on GPU %d: %v", bytes, gpu, err)
	}
	return l
}

// TestStreamsShareOneInstance (issue 26): four concurrent callers of a
// spec allowing four streams get one backend process under one lease that
// grows by a stream each (2 GiB + 3 × 512 MiB), decode at once, and shrink
// it stream by stream as they release; a fifth caller gets an instance of
// its own; the last release leaves the instance warm at its first size.
func TestStreamsShareOneInstance(t *testing.T) {
	r := newRig(t, []int64{24 * GiB})
	spec := r.streamSpec("model.bin", 4)
	insts, rels := r.acquireAll(spec, 4)
	first := insts[0]
	for _, inst := range insts {
		if inst.ID() != first.ID() || inst.PID() != first.PID() {
			t.Fatalf("instances %s (pid %d) and %s (pid %d): want one", inst.ID(), inst.PID(), first.ID(), first.PID())
		}
	}
	want := 2*GiB + 3*512*MiB
	if l := r.lease(first.Lease().ID); l.Bytes != want || len(r.leases()) != 1 {
		t.Fatalf("lease %d bytes, %d leases; want one of %d", l.Bytes, len(r.leases()), want)
	}
	if st := r.h.instances(); len(st) != 1 || st[0].Streams != 4 || st[0].MaxStreams != 4 || st[0].LeaseBytes != want {
		t.Errorf("status: %+v", st)
	}

	fifth, rel5 := r.acquire(spec) // at max_streams: an instance of its own
	if fifth.ID() == first.ID() || fifth.Lease().Bytes != 2*GiB {
		t.Errorf("fifth caller: instance %s, lease %d; want a new one of 2 GiB", fifth.ID(), fifth.Lease().Bytes)
	}
	rel5()

	audio := testshared.Touch(t, "a.wav")
	slow := map[string]string{plugintest.Segments: "5", plugintest.SegmentDelay: "20ms"}
	var wg sync.WaitGroup
	errs := make([]error, len(insts))
	for i, inst := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio, Extra: slow}, func(plugins.Event) error { return nil })
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Transcribe: %v", err)
		}
	}

	for i, rel := range rels {
		rel()
		left := 3 - i
		if l := r.lease(first.Lease().ID); l.Bytes != 2*GiB+int64(max(left-1, 0))*512*MiB || l.State != placement.StateGranted {
			t.Errorf("after %d releases: lease %s of %d bytes", i+1, l.State, l.Bytes)
		}
	}
	if st := r.h.instances(); st[0].State != StateIdle && st[1].State != StateIdle {
		t.Errorf("after the last release: %+v, want idle", st)
	}
	again, rel := r.acquire(spec) // warm, one stream
	defer rel()
	if again.ID() != first.ID() && again.ID() != fifth.ID() {
		t.Errorf("after release: instance %s, want a warm one", again.ID())
	}
}

// TestStreamStartsElsewhereWhenCheaper (issue 26): a stream that does not
// fit on its instance's GPU starts an instance on another GPU where a whole
// one fits.
func TestStreamStartsElsewhereWhenCheaper(t *testing.T) {
	r := newRig(t, []int64{4 * GiB, 4 * GiB})
	spec := r.streamSpec("model.bin", 4)
	a, relA := r.acquire(spec)
	defer relA()
	gpu := a.Lease().GPUIndex
	r.outside(gpu, 2*GiB-256*MiB) // 256 MiB left there: not a stream
	b, relB := r.acquire(spec)
	defer relB()
	if b.ID() == a.ID() || b.Lease().GPUIndex == gpu {
		t.Errorf("second caller on instance %s, GPU %d; want a new instance on the other GPU", b.ID(), b.Lease().GPUIndex)
	}
	if l := r.lease(a.Lease().ID); l.Bytes != 2*GiB {
		t.Errorf("first instance's lease %d bytes, want it unchanged", l.Bytes)
	}
}

// TestStreamWaitsThenJoins (issue 26): when neither one more stream fits on
// the instance's GPU nor a whole instance anywhere, the caller waits in the
// queue, and joins the instance as soon as a stream's growth fits there.
func TestStreamWaitsThenJoins(t *testing.T) {
	r := newRig(t, []int64{4 * GiB, 4 * GiB})
	spec := r.streamSpec("model.bin", 4)
	spec.Wait = time.Minute
	a, relA := r.acquire(spec)
	defer relA()
	gpu := a.Lease().GPUIndex
	blocker := r.outside(gpu, 2*GiB-256*MiB)
	r.outside(1-gpu, 3*GiB) // 1 GiB left: not a whole instance

	type got struct {
		inst *Instance
		rel  func()
		err  error
	}
	done := make(chan got, 1)
	go func() {
		inst, rel, err := r.h.Acquire(t.Context(), spec)
		done <- got{inst, rel, err}
	}()
	time.Sleep(200 * time.Millisecond) // queued (a fit would have answered at once)
	select {
	case g := <-done:
		t.Fatalf("Acquire answered without room: %v", g.err)
	default:
	}
	if _, err := r.eng.Resize(t.Context(), blocker.ID, GiB); err != nil { // 1 GiB free there now: a stream, not an instance
		t.Fatal(err)
	}
	var g got
	select {
	case g = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting caller did not join once a stream fit")
	}
	if g.err != nil {
		t.Fatal(g.err)
	}
	defer g.rel()
	if g.inst.ID() != a.ID() || g.inst.StreamBytes() != 512*MiB {
		t.Errorf("waiting caller got instance %s (added %d), want a stream of %s", g.inst.ID(), g.inst.StreamBytes(), a.ID())
	}
	if l := r.lease(a.Lease().ID); l.Bytes != 2*GiB+512*MiB {
		t.Errorf("lease after the join: %d bytes, want 2.5 GiB", l.Bytes)
	}
}

// TestCrashWithStreamsInFlight (issue 26): a backend killed while three
// streams decode is restarted once; each stream's call fails with
// ErrUnavailable only after the restart, and each can decode again on the
// new process; the lease keeps its grown size and shrinks as they release.
func TestCrashWithStreamsInFlight(t *testing.T) {
	r := newRig(t, []int64{24 * GiB})
	spec := r.streamSpec("model.bin", 3)
	insts, rels := r.acquireAll(spec, 3)
	oldPID := insts[0].PID()
	audio := testshared.Touch(t, "a.wav")
	slow := map[string]string{plugintest.Segments: "1000", plugintest.SegmentDelay: "20ms"}
	var started sync.WaitGroup
	started.Add(len(insts))
	errs := make([]error, len(insts))
	pids := make([]int, len(insts))
	var wg sync.WaitGroup
	for i, inst := range insts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			_, errs[i] = inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio, Extra: slow}, func(ev plugins.Event) error {
				if ev.Kind == plugins.EventSegment {
					once.Do(started.Done)
				}
				return nil
			})
			pids[i] = inst.PID() // after the call returned: the restarted process
		}()
	}
	started.Wait()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, plugins.ErrUnavailable) {
			t.Errorf("stream %d: %v, want ErrUnavailable", i, err)
		}
		if pids[i] == oldPID || pids[i] == 0 {
			t.Errorf("stream %d returned before the restart (pid %d)", i, pids[i])
		}
	}
	r.waitEvent(EventRestarted, nil)
	if n := insts[0].Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	for i, inst := range insts {
		if _, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio}, func(plugins.Event) error { return nil }); err != nil {
			t.Errorf("stream %d after the restart: %v", i, err)
		}
	}
	id := insts[0].Lease().ID
	if l := r.lease(id); l.Bytes != 3*GiB {
		t.Errorf("lease after the restart %d bytes, want 3 GiB", l.Bytes)
	}
	for _, rel := range rels {
		rel()
	}
	if l := r.lease(id); l.Bytes != 2*GiB {
		t.Errorf("lease after the releases %d bytes, want 2 GiB", l.Bytes)
	}
}
