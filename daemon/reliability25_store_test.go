package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// relIssue25Store adds the rows of issue 25 for the lease journal, the state database and the epoch (items 2–6, 13, 18).
func relIssue25Store(rec *relRecorder) {
	rec.single("#2 damaged leases.wal", "starts refused (file+offset); repair restores",
		"issue: 65/66 started, 20 live leases forgotten", relDamagedJournal)
	rec.single("#3 journal or db+epoch lost", "starts refused, or all leases restored",
		"issue: silent loss of journal-only leases", relLostJournal)
	rec.single("#4 bit flip in a lease value", "starts refused naming the key",
		"issue: 12 of 15 silently dropped", relFlippedValue)
	rec.single("#5 damaged bbolt pages", "refused 'state database is damaged'",
		"issue: 3 raw panics, 3 SIGBUS", relDamagedPages)
	rec.single("#6 disk full", "released leases back after restart",
		"issue: 25 after kill -9, 20 after a stop", relDiskFull)
	rec.single("#13 grants failed at SIGTERM", "kept though answered failed; releases back",
		"issue: 44 kept; up to 37 released back", relShutdownGrants)
	rec.single("#18 PIDs added to a lease", "restored PID of another process",
		"issue: restored without start time", relPIDStart)
	rec.single("#13 retry, idempotency key", "leases after 10 restarts and retries",
		"issue: a retry is a new grant", relIdempotentRetry)
}

// stateCopy copies the state files as a kill -9 leaves them (the daemon
// keeps running; every answered change is in them).
func stateCopy(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	for _, name := range []string{store.FileName, store.WALName, store.PrevWALName, store.EpochName} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(out, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func withState(cfg *config.Config, dir string) *config.Config {
	c := *cfg
	c.Daemon = cfg.Daemon
	c.Daemon.StateDir = dir
	return &c
}

// startLeases counts which of ids a daemon on cfg restores, or returns
// the error that refused its start (New's, or Run's before it served).
func startLeases(t *testing.T, cfg *config.Config, ids []string) (int, error) {
	sim := inventory.NewSim(cfg.Inventory.Sim)
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Config: cfg, Provider: p})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	c := client.New(cfg.Daemon.Socket)
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Health(ctx) != nil; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			done <- nil
			return 0, err
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon neither served nor failed in 10 s")
		}
	}
	ls, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range ls {
		for _, id := range ids {
			if l.ID == id && l.State == "granted" {
				n++
			}
		}
	}
	return n, nil
}

// heldLeases grants n leases of size to this process on a running daemon.
func heldLeases(t *testing.T, td *testDaemon, n int, size int64) []string {
	var ids []string
	for range n {
		l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: size, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
	}
	return ids
}

// relDamagedJournal: four leases in the journal (a crash copy), damaged
// four ways; every start must refuse naming leases.wal and an offset, and
// repair restore the leases whose records are intact.
func relDamagedJournal(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 64*GiB, nil)
	ids := heldLeases(t, td, 4, 2*GiB)
	time.Sleep(200 * time.Millisecond) // the journal's length is recorded
	base := stateCopy(t, td.cfg.Daemon.StateDir)
	td.stop()
	refused, restored, want := 0, 0, 0
	for _, damage := range []func([]byte){
		func(b []byte) { b[100] ^= 0x08 },    // in the first record
		func(b []byte) { clear(b[200:260]) }, // zeros in the middle
		func(b []byte) { b[len(b)-1] = 7 },   // garbage past the zeros
		func(b []byte) { b[2] ^= 0x01 },      // the header
	} {
		dir := stateCopy(t, base)
		path := filepath.Join(dir, store.WALName)
		data, _ := os.ReadFile(path)
		damage(data)
		_ = os.WriteFile(path, data, 0o600)
		_, err := startLeases(t, withState(td.cfg, dir), ids)
		if err != nil && errors.Is(err, store.ErrDamaged) && strings.Contains(err.Error(), path) && strings.Contains(err.Error(), "offset") {
			refused++
		}
		if _, err := store.Repair(dir, time.Now()); err != nil {
			return "repair: " + err.Error(), false
		}
		n, err := startLeases(t, withState(td.cfg, dir), ids)
		if err != nil {
			return "start after repair: " + err.Error(), false
		}
		restored, want = restored+n, want+len(ids)
	}
	// Repair restores every lease whose record is intact (the damaged
	// record's lease cannot be: at most one or two per trial).
	return fmt.Sprintf("%d of 4 refused; repair restored %d of %d", refused, restored, want), refused == 4 && restored >= want-4
}

// relLostJournal: the journal deleted, emptied, or deleted before the
// first fold, and the database with the epoch deleted.
func relLostJournal(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 64*GiB, nil)
	ids := heldLeases(t, td, 2, 2*GiB)
	time.Sleep(200 * time.Millisecond)
	base := stateCopy(t, td.cfg.Daemon.StateDir) // before the first fold: the leases are in the journal only
	td.stop()
	refused, whole, lost := 0, 0, 0
	for _, damage := range []func(dir string){
		func(dir string) { _ = os.Remove(filepath.Join(dir, store.WALName)) },
		func(dir string) { _ = os.Truncate(filepath.Join(dir, store.WALName), 0) },
		func(dir string) {
			_ = os.Remove(filepath.Join(dir, store.WALName))
			_ = os.Remove(filepath.Join(dir, store.EpochName))
		},
		func(dir string) {
			_ = os.Remove(filepath.Join(dir, store.FileName))
			_ = os.Remove(filepath.Join(dir, store.EpochName))
		},
	} {
		dir := stateCopy(t, base)
		damage(dir)
		n, err := startLeases(t, withState(td.cfg, dir), ids)
		switch {
		case err != nil && errors.Is(err, store.ErrDamaged):
			refused++
		case err == nil && n == len(ids):
			whole++
		default:
			lost++
		}
	}
	return fmt.Sprintf("%d refused, %d restored all, %d lost leases", refused, whole, lost), lost == 0
}

// relFlippedValue: a lease folded into bbolt (a stop), one bit flipped at
// 15 places of its stored value.
func relFlippedValue(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 64*GiB, nil)
	ids := heldLeases(t, td, 1, 2*GiB)
	td.stop()
	base := stateCopy(t, td.cfg.Daemon.StateDir)
	refused, dropped := 0, 0
	for i := range 15 {
		dir := stateCopy(t, base)
		path := filepath.Join(dir, store.FileName)
		data, _ := os.ReadFile(path)
		at := strings.LastIndex(string(data), ids[0]) + len(ids[0]) + 3 + 5*i // inside the value after the key
		data[at] ^= 1 << (i % 8)
		_ = os.WriteFile(path, data, 0o600)
		n, err := startLeases(t, withState(td.cfg, dir), ids)
		switch {
		case err != nil && strings.Contains(err.Error(), ids[0]):
			refused++
		case err == nil && n == 0:
			dropped++
		}
	}
	return fmt.Sprintf("%d of 15 refused naming the key, %d dropped", refused, dropped), refused == 15
}

// relDamagedPages: garbage over the data pages, over the freelist, and a
// file cut short.
func relDamagedPages(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 64*GiB, nil)
	ids := heldLeases(t, td, 3, 2*GiB)
	td.stop()
	base := stateCopy(t, td.cfg.Daemon.StateDir)
	refused := 0
	for _, damage := range []func([]byte) []byte{
		func(b []byte) []byte {
			for i := 2 * 4096; i < len(b); i++ {
				b[i] = byte(i*7 + 3)
			}
			return b
		},
		func(b []byte) []byte { return b[:3*4096] },
		func(b []byte) []byte {
			for i := 3 * 4096; i < 4*4096 && i < len(b); i++ {
				b[i] = 0xff
			}
			return b
		},
	} {
		dir := stateCopy(t, base)
		path := filepath.Join(dir, store.FileName)
		data, _ := os.ReadFile(path)
		_ = os.WriteFile(path, damage(data), 0o600)
		_, err := startLeases(t, withState(td.cfg, dir), ids) // a panic or SIGBUS ends the test binary
		if err != nil && strings.Contains(err.Error(), "state database is damaged") {
			refused++
		}
	}
	return fmt.Sprintf("%d of 3 refused, 0 panics, 0 SIGBUS", refused), refused == 3
}

// relDiskFull: the state dir on a full 16 MiB tmpfs; grants until they
// fail, then releases; the released leases must not come back after a
// kill -9 (a copy of the files) or a stop.
func relDiskFull(t *testing.T) (string, bool) {
	if os.Getuid() != 0 {
		return "skipped (needs root for a tmpfs)", true
	}
	disk := t.TempDir()
	if err := unix.Mount("tmpfs", disk, "tmpfs", 0, "size=16m"); err != nil {
		return "skipped: " + err.Error(), true
	}
	defer func() { _ = unix.Unmount(disk, unix.MNT_DETACH) }()
	td := startDaemon(t, 1, 1<<50, func(c *config.Config) { c.Daemon.StateDir = filepath.Join(disk, "state") })
	kept := heldLeases(t, td, 2, GiB)
	if f, err := os.Create(filepath.Join(disk, "filler")); err == nil {
		block := make([]byte, 1<<16)
		for {
			if _, err := f.Write(block); err != nil {
				break
			}
		}
		f.Close()
	}
	var released []string
	for range 20000 {
		l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: GiB, TTLSeconds: 600})
		if err != nil {
			break
		}
		released = append(released, l.ID)
	}
	failed := 0
	for _, id := range released {
		if _, err := td.c.Release(context.Background(), id); err != nil {
			failed++
		}
	}
	crash := stateCopy(t, td.cfg.Daemon.StateDir)
	td.stop()
	back := func(cfg *config.Config) string {
		n, err := startLeases(t, cfg, released)
		if err != nil {
			return "start failed: " + err.Error()
		}
		return fmt.Sprint(n)
	}
	afterKill, afterStop := back(withState(td.cfg, crash)), back(td.cfg)
	return fmt.Sprintf("%s after kill -9, %s after a stop (%d released on a full disk, %d failed)", afterKill, afterStop, len(released), failed),
		afterKill == "0" && afterStop == "0" && failed == 0 && len(released) > 0 && len(kept) == 2
}

// relShutdownGrants: 32 clients acquire (with a wait) and release in a
// loop while the daemon is stopped; at the next start no lease may be held
// that its client was not answered for, or had released. Then leases are
// released and the files copied at once (a crash right after the
// answers): none of them may come back.
func relShutdownGrants(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 8*GiB, nil)
	var mu sync.Mutex
	held := map[string]bool{}
	failed := 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: GiB, WaitSeconds: 2, TTLSeconds: 600})
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
					return
				}
				mu.Lock()
				held[l.ID] = true
				mu.Unlock()
				if _, err := td.c.Release(context.Background(), l.ID); err != nil {
					return
				}
				mu.Lock()
				delete(held, l.ID)
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	td.stop()
	wg.Wait()
	td2 := runDaemon(t, td.cfg)
	ls, _ := td2.c.Leases(context.Background())
	kept := 0
	for _, l := range ls {
		if l.State == "granted" && !held[l.ID] {
			kept++
		}
	}
	// The leases still held at the stop (answered granted, holder alive) are
	// restored; give them back so the GPU has room for the next part.
	for _, l := range ls {
		if _, err := td2.c.Release(context.Background(), l.ID); err != nil {
			t.Fatal(err)
		}
	}
	ids := heldLeases(t, td2, 6, GiB)
	for _, id := range ids {
		if _, err := td2.c.Release(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	crash := stateCopy(t, td2.cfg.Daemon.StateDir)
	td2.stop()
	back, err := startLeases(t, withState(td.cfg, crash), ids)
	if err != nil {
		return "start after the crash: " + err.Error(), false
	}
	return fmt.Sprintf("%d kept (%d answered failed at the stop); %d of 6 released back", kept, failed, back), kept == 0 && back == 0
}

// relPIDStart: a child process's PID added to a lease is stored with its
// start time; a stored start time that is not the running process's (the
// PID reused) is not restored.
func relPIDStart(t *testing.T) (string, bool) {
	td := startDaemon(t, 1, 64*GiB, nil)
	ids := heldLeases(t, td, 1, GiB)
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pid := child.Process.Pid
	if _, err := td.c.AddPID(context.Background(), ids[0], pid); err != nil {
		t.Fatal(err)
	}
	td.stop()
	db, err := store.Open(td.cfg.Daemon.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := db.Leases()
	if err != nil || len(ls) != 1 {
		t.Fatalf("stored leases %v, %v", ls, err)
	}
	stored := ls[0].PIDStarts[pid]
	other := ls[0]
	other.PIDStarts = map[int]uint64{pid: stored + 1} // as if another process had the PID now
	_ = db.Apply([]placement.Change{{Put: &other}})
	_ = db.Close()
	td2 := runDaemon(t, td.cfg)
	l, err := td2.c.Lease(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	counted := 0
	for _, p := range l.PIDs {
		if p == pid {
			counted++
		}
	}
	return fmt.Sprintf("start time stored: %v; reused PID restored: %d", stored != 0, counted), stored != 0 && counted == 0
}

// TestIssue25StoreRows runs the scenarios of the table's store rows as
// tests (`make reliability` prints them as rows).
func TestIssue25StoreRows(t *testing.T) {
	for name, f := range map[string]func(*testing.T) (string, bool){
		"DamagedJournal": relDamagedJournal, "LostJournal": relLostJournal, "FlippedValue": relFlippedValue,
		"DamagedPages": relDamagedPages, "DiskFull": relDiskFull, "ShutdownGrants": relShutdownGrants, "PIDStart": relPIDStart,
	} {
		t.Run(name, func(t *testing.T) {
			if fig, ok := f(t); !ok {
				t.Error(fig)
			} else {
				t.Log(fig)
			}
		})
	}
}
