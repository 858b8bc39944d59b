// Package simtest is test support: a placement engine over simulated GPUs
// (inventory's go-nvml mock), running until the test ends.
package simtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// GPUs returns one empty simulated GPU per size, named sim0, sim1, ….
func GPUs(sizes ...int64) []inventory.SimGPU {
	out := make([]inventory.SimGPU, len(sizes))
	for i, size := range sizes {
		out[i] = inventory.SimGPU{Name: fmt.Sprintf("sim%d", i), Memory: units.Bytes(size)}
	}
	return out
}

// Engine starts a placement engine over gpus with the default [placement]
// and [leases] settings, changed by mod (nil: none); Options.Inventory is
// already set to a reader of the simulated machine. The engine stops when
// the test ends.
func Engine(t testing.TB, gpus []inventory.SimGPU, mod func(*placement.Options)) (*placement.Engine, *inventory.Sim) {
	t.Helper()
	sim := inventory.NewSim(gpus)
	p, err := inventory.NewNVML(sim.Interface(), inventory.WithName("sim"))
	if err != nil {
		t.Fatal(err)
	}
	opts := placement.Options{Placement: placement.DefaultConfig(), Leases: placement.DefaultLeaseConfig(),
		Inventory: inventory.NewReader(p, inventory.DefaultConfig().MaxAge.D(), nil)}
	if mod != nil {
		mod(&opts)
	}
	eng := placement.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return eng, sim
}
