package main

import (
	"os"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/enforce"
	"github.com/wsched/wsched/enforce/nvmllimits"
	"github.com/wsched/wsched/enforce/preload"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement/inventory"
)

// localEnforcement is the tier the daemon would choose for each GPU of snap
// ([enforcement] mode, this host's facts), for `wsched gpus` without a
// daemon.
func localEnforcement(cfg *config.Config, snap inventory.Snapshot) func(inventory.GPU) enforce.Choice {
	facts := enforce.Probe("/proc", snap.Driver, os.LookupEnv, preload.Dirs(), nvmllimits.DefaultLibrary)
	return func(g inventory.GPU) enforce.Choice {
		f := facts
		f.MIG = g.MIG == inventory.MIGEnabled
		return enforce.Choose(cfg.Enforcement.Mode, f)
	}
}

// choiceOf is the daemon's answer for a GPU's tier (zero when it gives none).
func choiceOf(e *api.Enforcement) enforce.Choice {
	if e == nil {
		return enforce.Choice{}
	}
	return enforce.Choice{Tier: enforce.Tier(e.Tier), Reason: e.Reason}
}

// enforcementNote is a GPU's tier as a note line.
func enforcementNote(tier, reason string) string { return "enforcement " + tier + ": " + reason }
