package daemon

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// otherThread returns the ID of a thread of this process that is not its
// leader (a Go test binary always runs several).
func otherThread(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != os.Getpid() {
			return tid
		}
	}
	t.Skip("this process runs one thread")
	return 0
}

// TestThreadIDHolderIsItsProcess: a thread ID named as a lease's holder, or
// added to a lease, stands for its process: the lease stores and watches the
// thread group leader, never the thread.
func TestThreadIDHolderIsItsProcess(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	ctx := context.Background()
	tid := otherThread(t)
	l, err := td.c.Acquire(ctx, api.LeaseRequest{MemoryBytes: 1 << 20, Holder: &api.HolderRequest{PID: tid}})
	if err != nil {
		t.Fatalf("lease for thread %d: %v", tid, err)
	}
	if l.Holder.PID != os.Getpid() {
		t.Errorf("holder of a lease asked for thread %d: pid %d; want its process %d", tid, l.Holder.PID, os.Getpid())
	}
	l, err = td.c.AddPID(ctx, l.ID, tid)
	if err != nil {
		t.Fatalf("add thread %d to the lease: %v", tid, err)
	}
	if slices.Contains(l.PIDs, tid) {
		t.Errorf("lease pids %v hold thread %d; want its process %d", l.PIDs, tid, os.Getpid())
	}
}
