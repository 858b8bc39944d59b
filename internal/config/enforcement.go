package config

import (
	"slices"
	"time"

	"github.com/wsched/wsched/internal/units"
)

// Enforcement is the [enforcement] section: how leases are held to their
// size (docs/enforcement.md; package enforce chooses the tier).
type Enforcement struct {
	// Mode is auto (the strongest tier the GPU and host allow), or one of
	// the tiers: nvml-limits, mps, preload, detect. A tier the host cannot
	// give falls back to the next weaker one, and the daemon says why.
	Mode string `toml:"mode"`
	// Borrow is how far past its lease a holder may allocate (the hard
	// limit above the lease): the preload cap is lease + borrow.
	Borrow units.Bytes `toml:"borrow"`
	// ReclaimGrace is how long a holder borrowing past its lease has to
	// give the memory back once a waiting request needs it (a `reclaim`
	// event says by when); then it is stopped (SIGTERM).
	ReclaimGrace units.Duration `toml:"reclaim_grace"`
	// MPS is use (a running MPS control daemon makes the mps tier
	// available), manage (the daemon starts one, with its pipes under the
	// state directory, and stops it) or off.
	MPS string `toml:"mps"`
}

// EnforcementModes are the values [enforcement] mode allows.
var EnforcementModes = []string{"auto", "nvml-limits", "mps", "preload", "detect"}

func defaultEnforcement() Enforcement {
	return Enforcement{Mode: "auto", ReclaimGrace: units.Duration(30 * time.Second), MPS: "use"}
}

func (e Enforcement) validate() error {
	switch {
	case !slices.Contains(EnforcementModes, e.Mode):
		return bad("enforcement.mode", "%q is not allowed: want auto, nvml-limits, mps, preload or detect", e.Mode)
	case e.Borrow < 0:
		return bad("enforcement.borrow", "%s is not allowed: want 0B or more", e.Borrow.Exact())
	case e.MPS != "use" && e.MPS != "manage" && e.MPS != "off":
		return bad("enforcement.mps", "%q is not allowed: want use, manage or off", e.MPS)
	case e.ReclaimGrace <= 0:
		return bad("enforcement.reclaim_grace", "%s is not allowed: want a duration above 0", e.ReclaimGrace)
	}
	return nil
}
