package cgroup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Manager makes the holders' cgroups in a directory of its own under the
// calling process's cgroup.
type Manager struct {
	h   Hierarchy
	dir string
}

// Open opens sub under the process's cgroup in the best writable hierarchy
// of Hierarchies. ErrUnavailable: none is writable (not
// root, no delegation).
func Open(procRoot, sub string) (*Manager, error) {
	hs, err := Hierarchies(procRoot)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, h := range hs {
		m, err := OpenIn(h, sub)
		if err == nil {
			return m, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrUnavailable, errors.Join(errs...))
}

// OpenIn is Open in hierarchy h. The directory sub is made with the first
// group (New), so a process that never starts a holder leaves nothing.
func OpenIn(h Hierarchy, sub string) (*Manager, error) {
	if err := unix.Access(h.Dir(), unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup: %s is not writable: %w", h.Dir(), err)
	}
	return &Manager{h: h, dir: filepath.Join(h.Dir(), sub)}, nil
}

// Hierarchy is the hierarchy m works in.
func (m *Manager) Hierarchy() Hierarchy { return m.h }

// Dir is m's directory.
func (m *Manager) Dir() string { return m.dir }

// Close removes m's directory when no group is left in it.
func (m *Manager) Close() error {
	if err := os.Remove(m.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup: remove %s: %w", m.dir, err)
	}
	return nil
}

// New makes the cgroup name for one holder.
func (m *Manager) New(name string) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup: name %q: want one path element", name)
	}
	dir := filepath.Join(m.dir, name)
	if err := os.Mkdir(m.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: make %s: %w", m.dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup: make %s: %w", dir, err)
	}
	return &Group{dir: dir, v2: m.h.Version == V2, home: m.h.Dir()}, nil
}

// Of is the group process pid is in, in the best hierarchy of Hierarchies
// (a systemd scope made for it, say): Kill, PIDs and Remove act on it. A
// group on cgroup v1 has no home (Start is not for it).
func Of(procRoot string, pid int) (*Group, error) {
	hs, err := hierarchiesOf(procRoot, strconv.Itoa(pid))
	if err != nil {
		return nil, err
	}
	if len(hs) == 0 {
		return nil, fmt.Errorf("cgroup: process %d: %w", pid, ErrUnavailable)
	}
	return &Group{dir: hs[0].Dir(), v2: hs[0].Version == V2}, nil
}

// Group is one holder's cgroup. A nil *Group does nothing: callers without
// cgroups need no checks.
type Group struct {
	dir  string
	v2   bool
	home string   // the creating process's own cgroup (v1: Start's thread returns there)
	fd   *os.File // open for Prepare's CLONE_INTO_CGROUP (v2)
	// onRemove run first in Remove, last added first (the nvml-limits
	// tier clears the driver's limits before the cgroup goes).
	onRemove []func()
}

// OnRemove has Remove call f before it kills and removes the group.
func (g *Group) OnRemove(f func()) {
	if g != nil && f != nil {
		g.onRemove = append(g.onRemove, f)
	}
}

// Dir is the group's directory ("" for nil).
func (g *Group) Dir() string {
	if g == nil {
		return ""
	}
	return g.dir
}

// Prepare has cmd start inside the group (v2: clone3 with
// CLONE_INTO_CGROUP, so not even the first instruction runs outside it). On
// v1, or when the directory cannot be opened, Add after Start places it.
func (g *Group) Prepare(cmd *exec.Cmd) {
	if g == nil || !g.v2 || !clone3Usable() {
		return
	}
	if g.fd == nil {
		f, err := os.Open(g.dir)
		if err != nil {
			return
		}
		g.fd = f
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(g.fd.Fd())
}

// Start starts cmd inside the group, before its first instruction: on v2
// through Prepare; on v1 the calling OS thread joins the group for the fork
// (a v1 cgroup holds threads) and goes back after it. nil: cmd.Start().
func (g *Group) Start(cmd *exec.Cmd) error {
	if g == nil {
		return cmd.Start()
	}
	if g.v2 {
		g.Prepare(cmd)
		if err := cmd.Start(); err != nil {
			return err
		}
		return g.Add(cmd.Process.Pid) // without clone3 placed a moment late; else a no-op rewrite
	}
	runtime.LockOSThread()
	tid := []byte(strconv.Itoa(unix.Gettid()))
	if err := os.WriteFile(filepath.Join(g.dir, "tasks"), tid, 0); err != nil {
		runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			return err
		}
		return g.Add(cmd.Process.Pid) // placed a moment late; it runs either way
	}
	err := cmd.Start()
	if berr := os.WriteFile(filepath.Join(g.home, "tasks"), tid, 0); berr != nil {
		// The thread stays locked: it ends with its goroutine, so no later
		// goroutine runs in the holder's cgroup.
		return errors.Join(err, fmt.Errorf("cgroup: leave %s: %w", g.dir, berr))
	}
	runtime.UnlockOSThread()
	return err
}

// clone3Usable says whether clone3 reaches the kernel. A seccomp filter
// (systemd's SystemCallFilter= and RestrictNamespaces= in wsched.service)
// answers it ENOSYS so that libc falls back to clone, but Go's
// CLONE_INTO_CGROUP start has no fallback: the start fails with "function not
// implemented". Probed with a NULL argument of size 0, which the kernel
// refuses (EINVAL) without creating anything.
func clone3Usable() bool {
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	return errno != unix.ENOSYS
}

// Add moves pid (the whole process) into the group.
func (g *Group) Add(pid int) error {
	if g == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("cgroup: add pid %d to %s: %w", pid, g.dir, err)
	}
	return nil
}

// PIDs lists the processes in the group.
func (g *Group) PIDs() ([]int, error) {
	if g == nil {
		return nil, nil
	}
	data, err := os.ReadFile(filepath.Join(g.dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: list %s: %w", g.dir, err)
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Kill sends SIGKILL to every process in the group until it is empty or
// ctx ends: v2 writes cgroup.kill (the kernel kills them all, forks in
// flight included); v1 signals each listed process and looks again, so a
// process forked meanwhile is found on the next round.
func (g *Group) Kill(ctx context.Context) error {
	if g == nil {
		return nil
	}
	if g.v2 {
		_ = os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0) // absent before Linux 5.14
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		pids, err := g.PIDs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			if pid != os.Getpid() { // a thread of ours in a v1 group lists us: never kill ourselves
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cgroup: kill %s: %d processes left: %w", g.dir, len(pids), ctx.Err())
		case <-time.After(wait):
		}
	}
}

// Remove kills what is left in the group and removes it.
func (g *Group) Remove(ctx context.Context) error {
	if g == nil {
		return nil
	}
	for i := len(g.onRemove) - 1; i >= 0; i-- {
		g.onRemove[i]()
	}
	g.onRemove = nil
	if g.fd != nil {
		_ = g.fd.Close()
		g.fd = nil
	}
	err := g.Kill(ctx)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		rerr := os.Remove(g.dir)
		if rerr == nil || errors.Is(rerr, os.ErrNotExist) {
			return err
		}
		select { // EBUSY while the last exits are accounted
		case <-ctx.Done():
			return errors.Join(err, fmt.Errorf("cgroup: remove %s: %w", g.dir, rerr))
		case <-time.After(wait):
		}
	}
}

// SweepStale removes the groups named prefix+PID beside m (under the same
// parent) whose process is gone, killing what is left in them: a holder
// killed outright (SIGKILL) leaves its cgroup, and any setsid child in it,
// behind. procRoot is where /proc is mounted. It returns how many it
// removed.
func (m *Manager) SweepStale(ctx context.Context, procRoot, prefix string) int {
	entries, err := os.ReadDir(m.h.Dir())
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		pid, err := strconv.Atoi(rest)
		if !ok || err != nil || !e.IsDir() || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(filepath.Join(procRoot, rest)); err == nil {
			continue // its process runs
		}
		if removeTree(ctx, filepath.Join(m.h.Dir(), e.Name()), m.h.Version == V2) == nil {
			n++
		}
	}
	return n
}

// removeTree kills and removes dir's groups, then dir.
func removeTree(ctx context.Context, dir string, v2 bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("cgroup: sweep %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(ctx, filepath.Join(dir, e.Name()), v2); err != nil {
				return err
			}
		}
	}
	return (&Group{dir: dir, v2: v2}).Remove(ctx)
}
