package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement/inventory"
)

func newRunCmd(a *app) *cobra.Command {
	var f leaseFlags
	var fallback string
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run an existing app on the right GPU, under a lease, for as long as it runs",
		Long: `Acquire a lease (waiting in the queue up to --wait), start COMMAND with the lease's
environment (CUDA_VISIBLE_DEVICES=<GPU UUID>, SENSEVOICE_DEVICE=cuda:0, …), renew the
lease while it runs, forward signals to it, release the lease when it exits, and exit
with its status. WSCHED_DEVICE or SENSEVOICE_DEVICE in the environment pins a device.
Without --memory or --model the lease is [leases] default_memory.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fallback != "none" && fallback != "local" {
				return fmt.Errorf("--fallback %q: want none or local", fallback)
			}
			return a.runUnderLease(cmd.Context(), f, fallback, args)
		},
	}
	cmd.Flags().SetInterspersed(false)
	f.register(cmd.Flags(), 10*time.Minute)
	cmd.Flags().StringVar(&fallback, "fallback", "none", "when the daemon is unreachable: none (fail) or local (pick the GPU with the most free memory from a local reading, without a lease)")
	return cmd
}

func (a *app) runUnderLease(ctx context.Context, f leaseFlags, fallback string, args []string) error {
	if id := a.getenv("WSCHED_LEASE_ID"); id != "" {
		fmt.Fprintf(a.err, "wsched: already running under lease %s; starting %s without a new lease\n", id, args[0])
		return a.runChild(args, nil, func(int) {})
	}
	req, err := f.request()
	if err != nil {
		return err
	}
	if req.Device == "" {
		req.Device = a.getenvDevice()
	}
	c, cfg, err := a.client()
	if err != nil {
		return err
	}
	l, err := acquireSurviving(ctx, c, req, a.err)
	if errors.Is(err, client.ErrUnreachable) && fallback == "local" {
		env, lerr := a.localPlacement(cfg, req.Device, err)
		if lerr != nil {
			return lerr
		}
		return a.runChild(args, env, func(int) {})
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.err, "wsched: "+describe(l))
	bg := context.WithoutCancel(ctx)
	kctx, stopKeep := context.WithCancel(bg)
	k := newKeeper(c, l, req, true, a.err) // the child's environment names the GPU
	kept := make(chan struct{})
	go func() { defer close(kept); k.Run(kctx) }()
	err = a.runChild(args, withOwnPreload(l.Env, a.getenv("LD_PRELOAD")), func(pid int) {
		// A child that exited before the daemon looked at it (`wsched run
		// -- true`) raced the registration: nothing to warn about.
		// Nor did a process of its cgroup that is gone already.
		if err := k.AddPID(bg, pid); err != nil && !exited(pid) && syscall.Kill(pid, 0) == nil {
			fmt.Fprintf(a.err, "wsched: register pid %d with lease %s: %v\n", pid, l.ID, err)
		}
	})
	stopKeep()
	<-kept
	rctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if _, rerr := k.release(rctx); rerr != nil {
		fmt.Fprintf(a.err, "wsched: release %s: %v\n", k.Lease().ID, rerr)
	}
	return err
}

// runChild starts args with env added to ours, calls started with its PID,
// forwards signals, and returns its exit status as an exitError.
func (a *app) runChild(args []string, env map[string]string, started func(pid int)) error {
	child := exec.Command(args[0], args[1:]...)
	// The child dies with us (PR_SET_PDEATHSIG): if wsched run is killed
	// outright (SIGKILL, OOM killer), its lease ends at once, and a child
	// left running would use GPU memory no lease covers. Pdeathsig follows
	// the forking thread, so this goroutine keeps its thread until the
	// child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	child.Env = mergeEnv(os.Environ(), env)
	child.Stdin, child.Stdout, child.Stderr = a.in, a.out, a.err
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals(a.in)...)
	defer signal.Stop(sigs)
	cg, endCgroup, none, err := startInOwnCgroup(child) // ending the run kills what the child left (issue 27)
	defer endCgroup()
	if err != nil {
		fmt.Fprintf(a.err, "wsched: run: %v\n", err)
		return exitError{code: 127}
	}
	if none != nil {
		fmt.Fprintf(a.err, "wsched: warning: the child has no cgroup of its own (%v): processes it detaches with setsid may outlive the run\n", strings.ReplaceAll(none.Error(), "\n", "; "))
	}
	started(child.Process.Pid)
	stopFollow := make(chan struct{})
	defer close(stopFollow)
	go followGroup(cg, child.Process.Pid, started, stopFollow)
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	for {
		select {
		case sig := <-sigs:
			_ = child.Process.Signal(sig)
		case err := <-done:
			return childStatus(child, err)
		}
	}
}

// exited reports whether our child pid has exited, without reaping it
// (WNOWAIT: runChild's Wait still collects its status).
func exited(pid int) bool {
	var info unix.Siginfo // Linux leaves it zeroed when the child still runs
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == int32(unix.SIGCHLD)
}

// forwardedSignals are passed on to the child. SIGINT and SIGQUIT from a
// terminal already reach the child (same process group), so they are only
// forwarded when stdin is not a terminal.
func forwardedSignals(stdin any) []os.Signal {
	sigs := []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2}
	if !isTerminal(stdin) {
		sigs = append(sigs, syscall.SIGINT, syscall.SIGQUIT)
	} else {
		signal.Ignore(syscall.SIGINT, syscall.SIGQUIT) // the child decides; we wait for it
	}
	return sigs
}

func childStatus(child *exec.Cmd, err error) error {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("wait for %s: %w", child.Path, err)
	}
	ws, ok := child.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return exitError{code: 128 + int(ws.Signal())}
	case child.ProcessState.ExitCode() != 0:
		return exitError{code: child.ProcessState.ExitCode()}
	}
	return nil
}

// mergeEnv returns base with the variables of add set (replacing any).
func mergeEnv(base []string, add map[string]string) []string {
	out := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		_, replaced := add[k]
		return replaced
	})
	for _, k := range sortedKeys(add) {
		out = append(out, k+"="+add[k])
	}
	return out
}

// localPlacement is --fallback=local: with no daemon, pick the GPU with the
// most free memory from a local reading, as the seed system did, and warn
// that nothing is reserved.
func (a *app) localPlacement(cfg *config.Config, pin string, cause error) (map[string]string, error) {
	spec, err := device.Parse(pin)
	if err != nil {
		return nil, err
	}
	p, _, err := inventory.Open(cfg.Inventory, a.logger(cfg))
	if err != nil {
		return nil, err
	}
	defer p.Close()
	snap, err := p.Snapshot(context.Background())
	if err != nil {
		return nil, fmt.Errorf("local GPU reading: %w", err)
	}
	var best *inventory.GPU
	for i := range snap.GPUs {
		g := &snap.GPUs[i]
		ok := g.IsHealthy() && (spec.Kind == device.Auto || (spec.Kind == device.Index && g.Index == spec.Index) || g.UUID == spec.UUID)
		if ok && (best == nil || g.FreeBytes > best.FreeBytes) {
			best = g
		}
	}
	fmt.Fprintf(a.err, "wsched: warning: %v\n", cause)
	if best == nil || spec.Kind == device.CPU {
		fmt.Fprintln(a.err, "wsched: warning: no lease; running on the CPU")
		return map[string]string{"CUDA_VISIBLE_DEVICES": "", "SENSEVOICE_DEVICE": "cpu"}, nil
	}
	fmt.Fprintf(a.err, "wsched: warning: no lease; placed by a local reading on GPU %d (%s free): nothing reserves this memory\n",
		best.Index, units.FormatBytes(best.FreeBytes))
	return map[string]string{"CUDA_VISIBLE_DEVICES": best.UUID, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "SENSEVOICE_DEVICE": "cuda:0"}, nil
}
