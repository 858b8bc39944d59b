package config

import (
	"slices"

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
}

// EnforcementModes are the values [enforcement] mode allows.
var EnforcementModes = []string{"auto", "nvml-limits", "mps", "preload", "detect"}

func defaultEnforcement() Enforcement { return Enforcement{Mode: "auto"} }

func (e Enforcement) validate() error {
	switch {
	case !slices.Contains(EnforcementModes, e.Mode):
		return bad("enforcement.mode", "%q is not allowed: want auto, nvml-limits, mps, preload or detect", e.Mode)
	case e.Borrow < 0:
		return bad("enforcement.borrow", "%s is not allowed: want 0B or more", e.Borrow.Exact())
	}
	return nil
}
