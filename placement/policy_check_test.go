package placement

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/confval"
)

// TestUnknownPolicyRefused: a policy name that is none of spread, binpack
// and score is an error where it is used (Validate at load, the engine's
// Run), not taken for spread; a Config built in code without one gets the
// default.
func TestUnknownPolicyRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = "fastest"
	var ke *confval.KeyError
	if err := cfg.Validate(); !errors.As(err, &ke) || ke.Key != "policy" || !strings.Contains(ke.Msg, `"fastest" is not allowed`) {
		t.Errorf("Validate: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := New(Options{Placement: cfg}).Run(ctx); err == nil || !strings.Contains(err.Error(), `policy: "fastest" is not allowed`) {
		t.Errorf("Run with policy fastest: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run did not refuse the policy at once")
	}
	lc := DefaultLeaseConfig()
	lc.Overrun = "ignore"
	if err := lc.Validate(); !errors.As(err, &ke) || ke.Key != "overrun" {
		t.Errorf("LeaseConfig.Validate with overrun ignore: %v", err)
	}
	if e := New(Options{}); e.st.opts.Placement.Policy != PolicySpread {
		t.Errorf("a Config without a policy runs %q", e.st.opts.Placement.Policy)
	}
}
