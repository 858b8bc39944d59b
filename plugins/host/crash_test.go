package host

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// TestKillDuringTranscribe: kill -9 of the backend while it streams a
// transcription. The call fails with ErrUnavailable; the host reports the
// crash, restarts the backend under the same lease (new PID registered, old
// one gone) with the model reloaded; the next call works; and when the
// instance is dropped its lease is released, nothing leaked.
func TestKillDuringTranscribe(t *testing.T) {
	r := newRig(t, []int64{8 * GiB})
	spec := r.spec("model.bin", 2*GiB)
	spec.KeepAlive = -1 // drop at release
	inst, release := r.acquire(spec)
	lease, oldPID := inst.Lease(), inst.PID()
	audio := testshared.Touch(t, "a.wav")

	var segs int
	slow := map[string]string{plugintest.Segments: "1000", plugintest.SegmentDelay: "20ms"}
	_, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio, Extra: slow}, func(ev plugins.Event) error {
		if ev.Kind == plugins.EventSegment {
			if segs++; segs == 1 {
				if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
					t.Errorf("kill -9 %d: %v", oldPID, err)
				}
			}
		}
		return nil
	})
	if !errors.Is(err, plugins.ErrUnavailable) || segs >= 1000 {
		t.Fatalf("Transcribe under kill -9 = %v after %d segments; want ErrUnavailable mid-stream", err, segs)
	}

	crash := r.waitEvent(EventCrashed, nil)
	if crash.PID != oldPID || crash.Lease != lease.ID || crash.During != "transcribe" || !errors.Is(crash.Err, plugins.ErrUnavailable) {
		t.Errorf("crash event = %+v", crash)
	}
	if lines := r.logLines("level=ERROR", `msg="backend crashed"`, "backend=fake", "lease="+lease.ID, fmt.Sprintf("pid=%d", oldPID)); len(lines) != 1 {
		t.Errorf("want one ERROR line reporting the crash, got %q", lines)
	}
	restarted := r.waitEvent(EventRestarted, nil)
	newPID := inst.PID()
	if restarted.PID != newPID || newPID == oldPID || restarted.Lease != lease.ID || inst.Restarts() != 1 {
		t.Errorf("restart event = %+v; instance pid %d (was %d), %d restarts", restarted, newPID, oldPID, inst.Restarts())
	}
	el := r.lease(lease.ID)
	if el.State != placement.StateGranted || !slices.Contains(el.PIDs, newPID) || slices.Contains(el.PIDs, oldPID) {
		t.Errorf("lease after restart: %s, pids %v; want granted with %d, without %d", el.State, el.PIDs, newPID, oldPID)
	}
	if processAlive(oldPID) == nil {
		t.Errorf("killed backend %d still listed as running", oldPID)
	}
	if meta := inst.Info().Metadata; meta["model"] != spec.Load.ModelPath || meta["env.CUDA_VISIBLE_DEVICES"] != lease.GPU {
		t.Errorf("restarted backend: model %q, GPU %q; want the model reloaded under the lease", meta["model"], meta["env.CUDA_VISIBLE_DEVICES"])
	}

	res, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: audio}, func(plugins.Event) error { return nil })
	if err != nil || res.Text != "segment 0 segment 1 segment 2" {
		t.Fatalf("Transcribe after restart = %+v, %v", res, err)
	}

	release()
	if ev := r.waitEvent(EventStopped, nil); ev.Lease != lease.ID || ev.PID != newPID {
		t.Errorf("stopped event = %+v", ev)
	}
	if l := r.lease(lease.ID); l.State != placement.StateReleased {
		t.Errorf("lease %s is %s after the instance was dropped, want released", l.ID, l.State)
	}
	if ls := r.leases(); len(ls) != 0 {
		t.Errorf("leaked leases: %+v", ls)
	}
	if processAlive(newPID) == nil {
		t.Errorf("backend %d still runs after its instance was dropped", newPID)
	}
}

// TestGivesUpAfterMaxRestarts: a backend that keeps crashing is restarted
// [backends] max_restarts times, then given up; its release drops it and
// releases the lease.
func TestGivesUpAfterMaxRestarts(t *testing.T) {
	r := newRig(t, []int64{8 * GiB}, func(c *config.Backends, _ *Options) { c.MaxRestarts = 1 })
	inst, release := r.acquire(r.spec("model.bin", GiB))
	id := inst.Lease().ID
	crash := plugins.TranscribeRequest{AudioPath: testshared.Touch(t, "a.wav"), Extra: map[string]string{plugintest.CrashAfter: "0", plugintest.CrashMode: "exit"}}
	for i := range 2 {
		if _, err := inst.Transcribe(t.Context(), crash, nil); !errors.Is(err, plugins.ErrUnavailable) {
			t.Fatalf("crash %d: %v, want ErrUnavailable", i+1, err)
		}
	}
	r.waitEvent(EventRestarted, nil)
	given := r.waitEvent(EventGivenUp, nil)
	if !errors.Is(given.Err, ErrGivenUp) || given.Restarts != 1 {
		t.Errorf("given-up event = %+v", given)
	}
	_, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: crash.AudioPath}, nil)
	if !errors.Is(err, ErrGivenUp) || !errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("Transcribe on a given-up instance: %v, want ErrGivenUp and ErrUnavailable", err)
	}
	release()
	if ev := r.waitEvent(EventStopped, nil); !strings.HasPrefix(ev.Reason, "backend given up") {
		t.Errorf("stopped: %q", ev.Reason)
	}
	if l := r.lease(id); l.State != placement.StateReleased {
		t.Errorf("lease %s after giving up", l.State)
	}
}

// TestHealthCheckRestartsIdleBackend: an idle backend killed behind the
// host's back is found by the health check and restarted under its lease.
func TestHealthCheckRestartsIdleBackend(t *testing.T) {
	r := newRig(t, []int64{8 * GiB}, func(c *config.Backends, _ *Options) { c.HealthInterval.UnmarshalText([]byte("100ms")) })
	inst, release := r.acquire(r.spec("model.bin", GiB))
	id, oldPID := inst.Lease().ID, inst.PID()
	release()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	crash := r.waitEvent(EventCrashed, nil)
	restarted := r.waitEvent(EventRestarted, nil)
	if crash.During != "health check" || crash.PID != oldPID || restarted.Lease != id || restarted.PID == oldPID {
		t.Errorf("crash %+v, restart %+v", crash, restarted)
	}
	again, release2 := r.acquire(r.spec("model.bin", GiB)) // another file: a new instance
	defer release2()
	if again.Lease().ID == id {
		t.Error("a different model got the restarted instance")
	}
	el := r.lease(id)
	if !slices.Contains(el.PIDs, restarted.PID) || slices.Contains(el.PIDs, oldPID) {
		t.Errorf("lease pids %v after the health restart, want %d not %d", el.PIDs, restarted.PID, oldPID)
	}
}

// TestLostLeaseDropsInstance: when an operator releases an instance's lease,
// the host notices on renewal and stops the backend.
func TestLostLeaseDropsInstance(t *testing.T) {
	r := newRig(t, []int64{8 * GiB}, func(_ *config.Backends, o *Options) { o.LeaseTTL = 300 * time.Millisecond })
	inst, release := r.acquire(r.spec("model.bin", GiB))
	release()
	if _, err := r.eng.Release(t.Context(), inst.Lease().ID, "released by an operator"); err != nil {
		t.Fatal(err)
	}
	given := r.waitEvent(EventGivenUp, nil)
	if !errors.Is(given.Err, placement.ErrEnded) {
		t.Errorf("given up with %v, want ErrEnded", given.Err)
	}
	r.waitEvent(EventStopped, nil)
	if st, _ := r.h.Status(t.Context()); len(st.Instances) != 0 {
		t.Errorf("instances left: %+v", st.Instances)
	}
}

// TestShutdownReleasesEverything: stopping the host stops busy and idle
// backends alike and releases their leases.
func TestShutdownReleasesEverything(t *testing.T) {
	r := newRig(t, []int64{8 * GiB}, func(_ *config.Backends, o *Options) { o.LeaseTTL = time.Hour })
	busy, _ := r.acquire(r.spec("a.bin", GiB))
	_, rel := r.acquire(r.spec("b.bin", GiB))
	rel()
	if n := len(r.leases()); n != 2 {
		t.Fatalf("%d leases, want 2", n)
	}
	r.stop()
	<-r.stopped
	if ls := r.leases(); len(ls) != 0 {
		t.Errorf("leases after shutdown: %+v", ls)
	}
	if _, err := busy.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: "/a"}, nil); !errors.Is(err, plugins.ErrUnavailable) {
		t.Errorf("Transcribe after shutdown: %v", err)
	}
	if _, _, err := r.h.Acquire(t.Context(), r.spec("c.bin", GiB)); !errors.Is(err, ErrStopped) {
		t.Errorf("Acquire after shutdown: %v, want ErrStopped", err)
	}
}

// TestLeaseRenewedWhileInUse: a transcription longer than the lease's TTL
// keeps its lease, because the host renews it every third of the TTL.
func TestLeaseRenewedWhileInUse(t *testing.T) {
	r := newRig(t, []int64{8 * GiB}, func(_ *config.Backends, o *Options) { o.LeaseTTL = time.Second })
	inst, release := r.acquire(r.spec("model.bin", GiB))
	defer release()
	long := map[string]string{plugintest.Segments: "25", plugintest.SegmentDelay: "100ms"} // 2.5 TTLs
	if _, err := inst.Transcribe(t.Context(), plugins.TranscribeRequest{AudioPath: testshared.Touch(t, "a.wav"), Extra: long}, nil); err != nil {
		t.Fatal(err)
	}
	if l := r.lease(inst.Lease().ID); l.State != placement.StateGranted {
		t.Errorf("lease %s (%s) after a transcription longer than its TTL, want granted", l.State, l.Reason)
	}
}
