package placement

import (
	"fmt"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/internal/units"
)

// Preview is where a request would be placed now (Engine.Preview): the GPU
// the policy picks among the allowed ones, with the memory held for
// waiting requests taken off what is available.
type Preview struct {
	// Fits: a request of that size would be granted on Account now.
	Fits bool
	// CPU: the request runs on the CPU (pinned, or a machine without GPUs).
	CPU bool
	// Account is the chosen GPU's account; when nothing fits, the allowed
	// GPU with the most memory available. Index -1 when there is none.
	Account Account
	// AvailableBytes is Account's available memory less HeldBytes.
	AvailableBytes int64
	// HeldBytes is the memory held on that GPU for waiting requests.
	HeldBytes int64
	// Reason says why this GPU, or why nothing fits.
	Reason string
}

// Preview answers, without granting or queueing anything, where a request
// of bytes for dev at priority prio would be placed now: the same policy
// pick as a grant, over the published accounts less the memory held for
// blocked queue heads. It reads the published frame (no trip through the
// owner loop). A request the queue would hold back for earlier waiters of
// higher priority can still be shown as fitting.
func (e *Engine) Preview(bytes int64, dev device.Spec, prio Priority) Preview {
	f := e.board.frame.Load()
	none := Preview{Account: Account{Index: -1}}
	if dev.Kind == device.CPU {
		none.Fits, none.CPU, none.Reason = true, true, "the request pins the CPU"
		return none
	}
	if f == nil {
		none.Reason = "no GPU reading yet"
		return none
	}
	accts, _ := f.accounts()
	if len(accts) == 0 && dev.Kind == device.Auto {
		none.Fits, none.CPU, none.Reason = true, true, "no GPUs: a machine without GPUs runs on the CPU"
		return none
	}
	allowedAccts := make([]Account, 0, len(accts))
	for _, a := range accts {
		if allowed(dev, &a) {
			a.AvailableBytes -= f.hold[a.UUID]
			allowedAccts = append(allowedAccts, a)
		}
	}
	if len(allowedAccts) == 0 {
		none.Reason = fmt.Sprintf("no GPU %s on this machine", dev)
		return none
	}
	pol := e.st.opts.Placement
	if a, ok := Pick(pol.Policy, pol.Score, allowedAccts, bytes, prio); ok {
		return Preview{Fits: true, Account: a, AvailableBytes: a.AvailableBytes, HeldBytes: f.hold[a.UUID], Reason: previewReason(pol.Policy, dev)}
	}
	best := allowedAccts[0]
	for _, a := range allowedAccts[1:] {
		if a.Placeable && (!best.Placeable || a.AvailableBytes > best.AvailableBytes) {
			best = a
		}
	}
	p := Preview{Account: best, AvailableBytes: best.AvailableBytes, HeldBytes: f.hold[best.UUID]}
	p.Reason = fmt.Sprintf("does not fit now: %s requested, at most %s available (GPU %d)", units.FormatBytes(bytes),
		units.FormatBytes(max(0, best.AvailableBytes)), best.Index)
	if p.HeldBytes > 0 {
		p.Reason += fmt.Sprintf(", %s more held there for waiting requests", units.FormatBytes(p.HeldBytes))
	}
	if !best.Placeable {
		p.Reason = best.Reason
	}
	return p
}

func previewReason(p Policy, dev device.Spec) string {
	if dev.Kind != device.Auto {
		return fmt.Sprintf("pinned to %s", dev)
	}
	switch p {
	case PolicyBinpack:
		return "least available memory that fits (policy binpack)"
	case PolicyScore:
		return "highest score (policy score)"
	}
	return "most available memory (policy spread)"
}
