package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
)

// keeper keeps a lease for `wsched run` and `wsched lease --hold`: it renews
// it every third of its TTL and, when the lease is gone — a daemon that came
// back without it — acquires the same size again, on the same GPU (the
// child's environment names it), and registers the same processes. Each
// change of condition (daemon unreachable, lease lost, re-acquired) is said
// once, not at every renewal.
type keeper struct {
	c   *client.Client
	log io.Writer
	// pinned: the re-acquired lease must be on the same GPU (run: the
	// child cannot move); otherwise the same GPU is tried first.
	pinned bool

	mu    sync.Mutex
	lease api.Lease
	req   api.LeaseRequest
	pids  []int
	said  string // the condition last reported
}

// keepRetry is how often a lost lease is asked for again while it does not
// fit, and the daemon polled while unreachable.
const keepRetry = 2 * time.Second

func newKeeper(c *client.Client, l api.Lease, req api.LeaseRequest, pinned bool, log io.Writer) *keeper {
	return &keeper{c: c, log: log, pinned: pinned, lease: l, req: req, said: "ok"}
}

// Lease is the lease held now (its ID changes after a re-acquisition).
func (k *keeper) Lease() api.Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// AddPID registers pid with the lease, now and with any later one.
func (k *keeper) AddPID(ctx context.Context, pid int) error {
	k.mu.Lock()
	k.pids = append(k.pids, pid)
	id := k.lease.ID
	k.mu.Unlock()
	_, err := k.c.AddPID(ctx, id, pid)
	return err
}

// Run renews until ctx ends.
func (k *keeper) Run(ctx context.Context) {
	for {
		l := k.Lease()
		every := max(time.Duration(l.TTLSeconds*float64(time.Second))/3, 100*time.Millisecond)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		k.renew(ctx)
	}
}

func (k *keeper) renew(ctx context.Context) {
	l := k.Lease()
	_, err := k.c.Renew(ctx, l.ID, 0)
	switch {
	case err == nil:
		if k.say(ctx, "ok", fmt.Sprintf("wsched: the daemon answers again; lease %s kept", l.ID)) {
			k.registerAll(ctx, l.ID) // a registration may have failed while it was away
		}
	case ctx.Err() != nil:
	case errors.Is(err, client.ErrUnreachable):
		k.say(ctx, "unreachable", fmt.Sprintf("wsched: daemon unreachable; keeping lease %s and retrying: %v", l.ID, err))
	case lost(err):
		k.say(ctx, "lost", fmt.Sprintf("wsched: lease %s is gone (%v); asking for %d bytes again", l.ID, err, l.MemoryBytes))
		k.reacquire(ctx)
	default:
		k.say(ctx, "error:"+err.Error(), fmt.Sprintf("wsched: renew %s: %v", l.ID, err))
	}
}

// lost reports whether a renewal failed because the daemon no longer has
// the lease.
func lost(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusGone)
}

// reacquire asks for the lost lease's size again until it is granted or
// ctx ends, on the same GPU first (only there when pinned).
func (k *keeper) reacquire(ctx context.Context) {
	old := k.Lease()
	for ctx.Err() == nil {
		req := k.req
		req.MemoryBytes, req.TTLSeconds = old.MemoryBytes, old.TTLSeconds
		req.WaitSeconds = 0
		if old.GPUUUID != "" {
			req.Device = old.GPUUUID
		}
		l, err := k.c.Acquire(ctx, req)
		if err != nil && !k.pinned && old.GPUUUID != "" {
			req.Device = k.req.Device
			l, err = k.c.Acquire(ctx, req)
		}
		if err == nil {
			k.adopt(ctx, old, l)
			return
		}
		k.say(ctx, "reacquire:"+err.Error(), fmt.Sprintf("wsched: lease %s not granted again yet (%v); retrying every %s", old.ID, err, keepRetry))
		select {
		case <-ctx.Done():
		case <-time.After(keepRetry):
		}
	}
}

// adopt makes l the kept lease and registers the processes with it.
func (k *keeper) adopt(ctx context.Context, old, l api.Lease) {
	k.mu.Lock()
	k.lease = l
	k.mu.Unlock()
	where := "the same GPU"
	if l.GPUUUID != old.GPUUUID {
		where = fmt.Sprintf("GPU %d (%s) instead of %s: processes started before stay where they are", l.GPUIndex, l.GPUUUID, old.GPUUUID)
	}
	k.say(ctx, "ok", fmt.Sprintf("wsched: lease %s re-acquired as %s, %d bytes on %s", old.ID, l.ID, l.MemoryBytes, where))
	k.registerAll(ctx, l.ID)
}

// registerAll registers every process with lease id (again: the daemon
// ignores a PID it has).
func (k *keeper) registerAll(ctx context.Context, id string) {
	k.mu.Lock()
	pids := append([]int(nil), k.pids...)
	k.mu.Unlock()
	for _, pid := range pids {
		if _, err := k.c.AddPID(ctx, id, pid); err != nil {
			fmt.Fprintf(k.log, "wsched: register pid %d with lease %s: %v\n", pid, id, err)
		}
	}
}

// say prints msg when the condition changed since the last one said, and
// reports whether it did.
func (k *keeper) say(ctx context.Context, cond, msg string) bool {
	k.mu.Lock()
	changed := k.said != cond
	k.said = cond
	k.mu.Unlock()
	if changed && msg != "" && ctx.Err() == nil {
		fmt.Fprintln(k.log, msg)
	}
	return changed
}

// release gives the kept lease back.
func (k *keeper) release(ctx context.Context) (api.Lease, error) {
	return k.c.Release(ctx, k.Lease().ID)
}

// acquireSurviving asks for req and, while it waits in the queue, rides out
// a daemon restart or crash: a request the stopping daemon turns away
// (shutting down, cancelled) or whose connection breaks (the daemon was
// killed) is asked again, with the same priority and idempotency key, once
// the daemon answers (polled with backoff), for what is left of its wait.
// The key makes a retried grant the same lease: a grant the daemon made and
// recorded before it died is answered again, not granted twice. It says so
// once. A daemon that does not answer at the start fails as before (or
// falls back).
func acquireSurviving(ctx context.Context, c *client.Client, req api.LeaseRequest, log io.Writer) (api.Lease, error) {
	if req.WaitSeconds <= 0 {
		return c.Acquire(ctx, req)
	}
	if err := c.Health(ctx); errors.Is(err, client.ErrUnreachable) {
		return api.Lease{}, err
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = newIdempotencyKey()
	}
	deadline := time.Now().Add(time.Duration(req.WaitSeconds * float64(time.Second)))
	said, pause := false, backoffFirst/2
	for {
		l, err := c.Acquire(ctx, req)
		if err == nil || ctx.Err() != nil || !restarting(err) || !time.Now().Before(deadline) {
			return l, err
		}
		if !said {
			fmt.Fprintf(log, "wsched: the daemon stopped while the request waited (%v); asking again, priority %s, once it is back\n",
				err, orDefault(req.Priority, "normal"))
			said = true
		}
		if err := waitDaemon(ctx, c, deadline); err != nil {
			return api.Lease{}, err
		}
		if client.IsCode(err, "idempotency_in_progress") { // the first attempt is being withdrawn
			pause = min(2*pause, backoffMax)
			select {
			case <-ctx.Done():
				return api.Lease{}, ctx.Err()
			case <-time.After(pause):
			}
		}
		req.WaitSeconds = time.Until(deadline).Seconds()
	}
}

// newIdempotencyKey is a random key for one lease request and its retries.
func newIdempotencyKey() string {
	return "cli-" + rand.Text()
}

// restarting reports whether err is how a stopping or crashed daemon ends
// a waiting request (or a retry meets the first attempt still undecided).
func restarting(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code == "shutting_down" || ae.Code == "cancelled" || ae.Code == "idempotency_in_progress"
	}
	return errors.Is(err, client.ErrUnreachable) || connectionLost(err)
}

// connectionLost reports whether err is a connection the daemon dropped
// (killed) before answering.
func connectionLost(err error) bool {
	for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNREFUSED, syscall.ENOENT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Backoff of the polls for a daemon that went away.
const (
	backoffFirst = 100 * time.Millisecond
	backoffMax   = 2 * time.Second
)

// waitDaemon polls with backoff until the daemon answers, or the deadline
// passes.
func waitDaemon(ctx context.Context, c *client.Client, deadline time.Time) error {
	pause := backoffFirst
	for {
		err := c.Health(ctx)
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("the daemon did not come back within the wait: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(pause, time.Until(deadline))):
		}
		pause = min(2*pause, backoffMax)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
