package procwatch

import (
	"testing"
	"time"
)

// TestIdleSetBounds: at most idleMax idle PIDs, the oldest evicted first;
// expired pops those idle past idleKeep and says when the next one is due.
func TestIdleSetBounds(t *testing.T) {
	s := newIdleSet()
	t0 := time.Now()
	var evicted []int
	for pid := 1; pid <= idleMax+3; pid++ {
		evicted = append(evicted, s.add(pid, t0.Add(time.Duration(pid)*time.Millisecond))...)
	}
	if len(s.since) != idleMax || len(evicted) != 3 || evicted[0] != 1 || evicted[2] != 3 {
		t.Fatalf("idle %d, evicted %v; want %d idle, evicted [1 2 3]", len(s.since), evicted, idleMax)
	}
	s.remove(4)                   // watched again: its entry is skipped
	s.add(5, t0.Add(time.Second)) // already idle: stays as of its first time
	ev, next := s.expired(t0.Add(idleKeep + 6*time.Millisecond))
	if len(ev) != 2 || ev[0] != 5 || ev[1] != 6 || next != time.Millisecond {
		t.Fatalf("expired %v (next %v), want [5 6] and 1ms", ev, next)
	}
	for i := 0; i < 10*idleMax; i++ { // toggling one PID keeps the order bounded
		s.remove(7)
		s.add(7, t0.Add(2*time.Second))
	}
	if len(s.order) > 4*idleMax+1 {
		t.Fatalf("order grew to %d entries", len(s.order))
	}
	if ev, next := s.expired(t0.Add(time.Hour)); len(ev) != len(s.since)+len(ev) || next != -1 {
		t.Fatalf("after an hour: %d still idle, next %v", len(s.since), next)
	}
}

// TestUnwatchedExitNotReported: an unwatched (idle) process's exit is not
// reported, its pidfd is closed once seen; watched again through
// WatchProcess, its exit is reported.
func TestUnwatchedExitNotReported(t *testing.T) {
	w := runWatcher(t)
	a, b := startSleep(t), startSleep(t)
	for _, c := range []int{a.Process.Pid, b.Process.Pid} {
		if err := w.WatchProcess("/proc", c, 0); err != nil {
			t.Fatal(err)
		}
		w.Unwatch(c)
	}
	if !w.Leader(a.Process.Pid) {
		t.Fatal("an idle process is not known as a process")
	}
	if err := w.WatchProcess("/proc", b.Process.Pid, 0); err != nil { // b leases again
		t.Fatal(err)
	}
	_ = a.Process.Kill()
	_ = a.Wait()
	_ = b.Process.Kill()
	_ = b.Wait()
	select {
	case pid := <-w.Exited():
		if pid != b.Process.Pid {
			t.Fatalf("exit of %d reported, want only %d", pid, b.Process.Pid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the exit of a process watched again was not reported")
	}
	select {
	case pid := <-w.Exited():
		t.Fatalf("exit of idle %d reported", pid)
	case <-time.After(300 * time.Millisecond):
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.byPID) != 0 {
		t.Fatalf("still holding %v", w.byPID)
	}
}
