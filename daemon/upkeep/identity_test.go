package upkeep

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/internal/testtmp"
	"github.com/wsched/wsched/placement"
)

// fakeBoot is a /proc for pid (a link to the real one) under a kernel
// whose boot ID is bootID.
func fakeBoot(t *testing.T, pid int, bootID string) string {
	t.Helper()
	root := testtmp.ShortDir(t)
	if err := os.Symlink(fmt.Sprintf("/proc/%d", pid), filepath.Join(root, fmt.Sprint(pid))); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "sys/kernel/random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(bootID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestRecoverAfterReboot: leases stored under another boot ID are released
// at recovery even when a process with the holder's PID and start time runs
// now (after a reboot it cannot be the holder); under the same boot ID the
// live holder keeps its lease. The boot ID is stored for the next start.
func TestRecoverAfterReboot(t *testing.T) {
	for _, tc := range []struct {
		stored string
		kept   bool
	}{{"boot-before", false}, {"boot-now", true}, {"", true}} {
		t.Run(fmt.Sprintf("stored=%q", tc.stored), func(t *testing.T) {
			r := newRig(t)
			holder := exec.Command("sleep", "60")
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
			pid := holder.Process.Pid
			info, err := procwatch.Read("/proc", pid)
			if err != nil {
				t.Fatal(err)
			}
			root := fakeBoot(t, pid, "boot-now")
			r.u.opts.ProcRoot = root
			if tc.stored != "" {
				if err := r.db.SetBootID(tc.stored); err != nil {
					t.Fatal(err)
				}
			}
			now := time.Now()
			l := placement.Lease{ID: "l1", State: placement.StateGranted, GPU: "cpu", GPUIndex: -1, TTL: time.Hour,
				Created: now, Granted: now, Expires: now.Add(time.Hour),
				Holder: placement.Holder{PID: pid, StartTicks: info.StartTicks}}
			if err := r.db.PutLease(l); err != nil {
				t.Fatal(err)
			}
			if err := r.u.Recover(t.Context()); err != nil {
				t.Fatal(err)
			}
			stored, err := r.db.Leases()
			if err != nil {
				t.Fatal(err)
			}
			if kept := len(stored) == 1; kept != tc.kept {
				t.Errorf("boot ID stored %q, now boot-now: lease kept %v; want %v", tc.stored, kept, tc.kept)
			}
			if got, err := r.db.BootID(); err != nil || got != "boot-now" {
				t.Errorf("stored boot ID after recovery: %q, %v; want boot-now", got, err)
			}
		})
	}
}

// TestTickSkipsReusedHolderPID: a GPU process whose parent has a lease
// holder's PID but another start time (the holder exited and its PID was
// reused before the exit was handled) is not counted against the lease.
func TestTickSkipsReusedHolderPID(t *testing.T) {
	r := newRig(t)
	parent := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	var line [16]byte
	n, _ := out.Read(line[:])
	child, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", line[:n], err)
	}
	info, err := procwatch.Read("/proc", parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.u.Recover(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The lease's holder had the parent's PID but started earlier.
	former := placement.Holder{PID: parent.Process.Pid, StartTicks: info.StartTicks - 1}
	l, err := r.eng.Acquire(t.Context(), placement.Request{Bytes: 4 * GiB, Holder: former})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.sim.SetProcess(0, child, "sleep", 3*GiB)
	if err := r.u.tick(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := r.eng.Get(t.Context(), l.ID)
	if slices.Contains(got.PIDs, child) || got.UsedBytes != 0 {
		t.Errorf("lease of a former holder with PID %d: pids %v, used %d; want the new process's child %d not counted",
			former.PID, got.PIDs, got.UsedBytes, child)
	}
}
