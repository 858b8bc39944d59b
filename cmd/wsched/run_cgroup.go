package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/cgroup"
)

// childCgroup gives `wsched run`'s child a cgroup of its own under this
// process's (issue 27), so that ending the run ends everything the child
// started, setsid or not. It returns nil (no cgroup; end does nothing) where
// none can be made: not root and no delegated subtree. The cgroups that
// runs killed with SIGKILL left behind are swept first.
func childCgroup() (g *cgroup.Group, end func(), err error) {
	m, err := cgroup.Open("/proc", fmt.Sprintf("wsched-run-%d", os.Getpid()))
	if err != nil {
		return nil, func() {}, err
	}
	sweep, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	m.SweepStale(sweep, "/proc", "wsched-run-") // runs killed outright: their setsid leftovers end now
	cancel()
	if g, err = m.New("child"); err != nil {
		_ = m.Close()
		return nil, func() {}, err
	}
	return g, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Remove(ctx)
		_ = m.Close()
	}, nil
}

// withOwnPreload keeps the caller's LD_PRELOAD after the one the lease's
// environment brings (the preload tier's cap, which must come first):
// mergeEnv would otherwise replace it.
func withOwnPreload(env map[string]string, own string) map[string]string {
	lease, ok := env["LD_PRELOAD"]
	if !ok || own == "" {
		return env
	}
	out := maps.Clone(env)
	out["LD_PRELOAD"] = preload.Env(lease, own, 0, 0, "")["LD_PRELOAD"]
	return out
}
