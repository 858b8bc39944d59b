package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/wsched/wsched/internal/cgroup"
)

// startInOwnCgroup starts `wsched run`'s child in a cgroup of its own
// (issue 27): where systemd is PID 1, a transient scope unit with
// Delegate=yes made for the child's PID (the child waits at a gate until
// it is in the scope, so nothing it forks starts outside); elsewhere, or
// when systemd refuses, the cgroup childCgroup makes. end kills what is left
// in the group and removes it.
//
// none is why the child got no cgroup of its own (nil when it did): it
// still runs, but what it detaches with setsid may outlive the run.
func startInOwnCgroup(child *exec.Cmd) (g *cgroup.Group, end func(), none, err error) {
	if !systemdBooted() {
		g, end, none = childCgroup()
		return g, end, none, g.Start(child)
	}
	open, err := gate(child)
	if err != nil {
		return nil, func() {}, nil, err
	}
	if err := child.Start(); err != nil {
		open()
		return nil, func() {}, nil, err
	}
	defer open()
	scope, endScope, serr := childScope(child.Process.Pid)
	if serr == nil {
		return scope, endScope, nil, nil
	}
	g, end, none = childCgroup()
	if none == nil {
		none = g.Add(child.Process.Pid) // before the gate opens: the child has not run yet
	}
	if none != nil {
		none = errors.Join(serr, none)
	}
	return g, end, none, nil
}

// systemdBooted reports whether systemd is the init system (sd_booted(3)).
func systemdBooted() bool {
	st, err := os.Stat("/run/systemd/system")
	return err == nil && st.IsDir()
}

// gate has child wait, once started, until open is called: /bin/sh reads
// the gate's fd (a pipe whose write end open closes), then execs the
// program with the same PID, that fd closed. The gate's fd comes after the
// child's own ExtraFiles, which keep their numbers (3 onwards).
func gate(child *exec.Cmd) (open func(), err error) {
	if child.Err != nil {
		return nil, child.Err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("run: gate: %w", err)
	}
	path, fd := child.Path, 3+len(child.ExtraFiles)
	script := fmt.Sprintf(`read _ <&%d; exec %d<&- "$@"`, fd, fd)
	child.Args = append([]string{"sh", "-c", script, "wsched-run", path}, child.Args[1:]...)
	child.Path = "/bin/sh"
	child.ExtraFiles = append(child.ExtraFiles, r)
	return func() {
		_ = r.Close()
		_ = w.Close()
	}, nil
}

// childScope puts pid into a new transient scope unit,
// wsched-run-<our PID>-<pid>.scope, with Delegate=yes: through systemd's
// private socket as root, the user's bus otherwise. The group returned is
// the scope's cgroup; end kills what is in it and stops the unit.
func childScope(pid int) (*cgroup.Group, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connect := sdbus.NewUserConnectionContext
	if os.Geteuid() == 0 {
		connect = sdbus.NewSystemdConnectionContext
	}
	conn, err := connect(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("run: scope: connect to systemd: %w", err)
	}
	name := fmt.Sprintf("wsched-run-%d-%d.scope", os.Getpid(), pid)
	props := []sdbus.Property{
		sdbus.PropDescription(fmt.Sprintf("wsched run (pid %d)", os.Getpid())),
		sdbus.PropPids(uint32(pid)),
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, name, "fail", props, done); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("run: scope %s: %w", name, err)
	}
	select {
	case res := <-done:
		if res != "done" {
			conn.Close()
			return nil, nil, fmt.Errorf("run: scope %s: job %s", name, res)
		}
	case <-ctx.Done():
		conn.Close()
		return nil, nil, fmt.Errorf("run: scope %s: %w", name, ctx.Err())
	}
	g, err := cgroup.Of("/proc", pid)
	if err == nil && !strings.HasSuffix(g.Dir(), "/"+name) {
		err = fmt.Errorf("run: scope %s: the child is in %s", name, g.Dir())
	}
	if err != nil {
		stopUnit(conn, name)
		conn.Close()
		return nil, nil, err
	}
	return g, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Kill(ctx) // setsid leftovers; the unit's stop would kill them too (SIGTERM first)
		stopUnit(conn, name)
		conn.Close()
	}, nil
}

// stopUnit stops the unit and waits for the job (10 s at most); a unit
// already gone (its last process exited) is no error.
func stopUnit(conn *sdbus.Conn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan string, 1)
	if _, err := conn.StopUnitContext(ctx, name, "replace", done); err != nil {
		return // gone already: its last process exited
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// followGroup hands add every process that appears in g (the child's
// cgroup or scope) until stop is closed, looking every second: the lease's
// processes come from the cgroup, not from parent chains.
func followGroup(g *cgroup.Group, seen int, add func(pid int), stop <-chan struct{}) {
	if g == nil {
		return
	}
	known := map[int]bool{seen: true}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		pids, err := g.PIDs()
		if err != nil {
			return
		}
		for _, pid := range pids {
			if !known[pid] {
				known[pid] = true
				add(pid)
			}
		}
	}
}
