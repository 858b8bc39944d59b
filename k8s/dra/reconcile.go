package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// reconcile brings the driver's three records of prepared claims — its
// checkpoint, the daemon's leases labelled k8s.claim and the CDI specs in
// CDIDir — in line with the claims of the API server, at start-up (after a
// restart or a crash of the driver, whatever the kubelet did meanwhile):
//
//   - a claim the driver prepared (checkpoint or lease) that is still
//     allocated on this node and reserved for a pod keeps its leases:
//     adopted, not taken twice; a lease the daemon lost is taken again and
//     its CDI spec rewritten;
//   - a claim deleted, deallocated, allocated elsewhere or reserved for
//     no pod any more (unprepared while the driver was down) loses its
//     leases, its CDI spec and its checkpoint entry;
//   - a CDI spec of no prepared claim is removed.
//
// The API server is the judge: when it cannot list the claims nothing is
// changed and reconcile fails (Run tries again).
func (d *Driver) reconcile(ctx context.Context) error {
	claims, err := d.opts.Claims.List(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	live := map[string]Claim{}
	for _, c := range claims {
		if c.Reserved && d.onNode(c) {
			live[c.UID] = c
		}
	}
	leases, err := d.d.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: list leases: %w", err)
	}
	prepared := map[string]bool{}
	for uid := range d.claims {
		prepared[uid] = true
	}
	for _, l := range leases {
		if uid := l.Labels[LabelClaim]; uid != "" {
			prepared[uid] = true
		}
	}
	var errs []error
	kept, released := 0, 0
	for uid := range prepared {
		c, ok := live[uid]
		if !ok {
			d.log.Info("reconcile: claim gone or unprepared while the driver was down; releasing", "claim", uid)
			errs = append(errs, d.unprepare(ctx, uid))
			released++
			continue
		}
		if _, err := d.prepareResults(ctx, c, leases); err != nil {
			// The pod runs: keep what is there, say so.
			errs = append(errs, fmt.Errorf("reconcile: keep claim %s/%s: %w", c.Namespace, c.Name, err))
			continue
		}
		kept++
	}
	errs = append(errs, d.removeStaleSpecs(prepared, live))
	d.log.Info("reconciled prepared claims", "kept", kept, "released", released)
	if err := errors.Join(errs...); err != nil {
		// Not retried: the API server answered; what failed is logged.
		d.log.Warn("reconcile: some claims", "err", err)
	}
	return nil
}

// onNode tells whether claim c has a device of this driver on this node.
func (d *Driver) onNode(c Claim) bool {
	for _, r := range c.Results {
		if r.Driver == DriverName && r.Pool == d.opts.Node {
			return true
		}
	}
	return false
}

// removeStaleSpecs removes the CDI specs (and left-over temporary files)
// of claims that are not prepared and live.
func (d *Driver) removeStaleSpecs(prepared map[string]bool, live map[string]Claim) error {
	ents, err := os.ReadDir(d.opts.CDIDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reconcile: CDI specs: %w", err)
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		uid, ok := strings.CutPrefix(name, "wsched.io-claim_")
		if !ok {
			continue
		}
		tmp := strings.HasSuffix(uid, ".json.tmp")
		uid = strings.TrimSuffix(strings.TrimSuffix(uid, ".tmp"), ".json")
		if _, isLive := live[uid]; !tmp && prepared[uid] && isLive {
			continue
		}
		if err := os.Remove(filepath.Join(d.opts.CDIDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("reconcile: %w", err))
			continue
		}
		d.log.Info("reconcile: stale CDI spec removed", "file", name)
	}
	return errors.Join(errs...)
}
