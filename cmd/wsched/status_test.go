package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// TestStatusShowsHeldMemory: memory held for a blocked queue head is named on
// its GPU and on the queued request (the formula counts it as available).
func TestStatusShowsHeldMemory(t *testing.T) {
	var out bytes.Buffer
	a := &app{streams: streams{out: &out}}
	gpus := api.GPUs{
		GPUs: []api.GPU{{GPUReading: api.GPUReading{Index: 1, Name: "Sim"}, Accounting: api.Account{TotalBytes: 24 * GiB,
			UsableBytes: 24 * GiB, AvailableBytes: 12 * GiB, Placeable: true}, HeldBytes: 10 * GiB}},
		Queue: []api.Lease{{ID: "l-big", MemoryBytes: 20 * GiB, Priority: "normal", Created: time.Now()}},
		Held:  []api.Hold{{LeaseID: "l-big", GPUIndex: 1, Bytes: 10 * GiB}},
	}
	if err := renderStatus(a, api.Status{Started: time.Now(), QueueLength: 1, HeldBytes: 10 * GiB}, gpus); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"10.00 GiB of the available memory is held for the queue head", "queued: l-big 20.00 GiB priority normal, waiting 0s, 10.00 GiB held for it on GPU 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// TestStatusShowsUseAndShare: each uid's leases, bytes, waiting requests,
// held memory and recent use are shown next to its fair share.
func TestStatusShowsUseAndShare(t *testing.T) {
	var out bytes.Buffer
	a := &app{streams: streams{out: &out}}
	gpus := api.GPUs{UIDs: []api.UIDUse{
		{UID: 0, Leases: 2, Bytes: 8 * GiB, UseGiBSeconds: 300, UseFraction: 0.75, Share: 0.5, ShareBytes: 24 * GiB},
		{UID: 65534, Queued: 1, QueuedBytes: 20 * GiB, HeldBytes: 20 * GiB, UseGiBSeconds: 100, UseFraction: 0.25, Share: 0.5, ShareBytes: 24 * GiB},
	}}
	if err := renderStatus(a, api.Status{Started: time.Now()}, gpus); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	want := map[string][]string{
		"0 ":     {"root", "8.00 GiB", "300", "75%", "50% (24.00 GiB)"},
		"65534 ": {"20.00 GiB", "100", "25%", "50% (24.00 GiB)"},
	}
	for prefix, fields := range want {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				found = true
				for _, f := range fields {
					if !strings.Contains(l, f) {
						t.Errorf("uid row %q lacks %q", l, f)
					}
				}
			}
		}
		if !found {
			t.Errorf("no row for uid %s:\n%s", prefix, out.String())
		}
	}
}
