package client

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
)

// leaseIDs lists where each lease is: "gpu0:a gpu1: cpu:b queue:c".
func leaseIDs(g api.GPUs) string {
	var out []string
	ids := func(ls []api.Lease) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.ID)
		}
		return strings.Join(s, ",")
	}
	for _, gpu := range g.GPUs {
		out = append(out, fmt.Sprintf("gpu%d:%s", gpu.Index, ids(gpu.Leases)))
	}
	return strings.Join(append(out, "cpu:"+ids(g.CPU), "queue:"+ids(g.Queue)), " ")
}

func TestMonitorStateAppliesDeltas(t *testing.T) {
	st := monitorState{GPUs: api.GPUs{GPUs: []api.GPU{
		{GPUReading: api.GPUReading{Index: 0, UUID: "GPU-0"}, Leases: []api.Lease{{ID: "a", State: "granted", GPUUUID: "GPU-0"}}},
		{GPUReading: api.GPUReading{Index: 1, UUID: "GPU-1"}},
	}}}
	before := st.GPUs
	ev := func(id, state, gpu string, bytes int64) api.Event {
		return api.Event{Lease: api.Lease{ID: id, State: state, GPUUUID: gpu, MemoryBytes: bytes}}
	}
	steps := []struct {
		ev   api.Event
		want string
	}{
		{ev("b", "queued", "", 1), "gpu0:a gpu1: cpu: queue:b"},
		{ev("c", "granted", "", 1), "gpu0:a gpu1: cpu:c queue:b"},           // a CPU lease
		{ev("b", "granted", "GPU-1", 1), "gpu0:a gpu1:b cpu:c queue:"},      // the queued one granted
		{ev("a", "granted", "GPU-0", 7), "gpu0:a gpu1:b cpu:c queue:"},      // resized/renewed: in place
		{ev("a", "released", "GPU-0", 7), "gpu0: gpu1:b cpu:c queue:"},      // gone
		{ev("d", "rejected", "", 1), "gpu0: gpu1:b cpu:c queue:"},           // never shown
		{ev("c", "expired", "", 1), "gpu0: gpu1:b cpu: queue:"},             // gone
		{ev("e", "queued", "", 1), "gpu0: gpu1:b cpu: queue:e"},             // waits
		{ev("e", "queued", "", 2), "gpu0: gpu1:b cpu: queue:e"},             // still one entry
		{ev("b", "released", "GPU-1", 1), "gpu0: gpu1: cpu: queue:e"},       // gone
		{ev("e", "granted", "GPU-0", 2), "gpu0:e gpu1: cpu: queue:"},        // granted from the queue
		{ev("f", "granted", "GPU-unknown", 2), "gpu0:e gpu1: cpu:f queue:"}, // a GPU the client does not know
	}
	var kept []api.GPUs
	for i, s := range steps {
		st.applyEvent(s.ev)
		if got := leaseIDs(st.GPUs); got != s.want {
			t.Fatalf("step %d (%s %s): %s, want %s", i, s.ev.Lease.ID, s.ev.Lease.State, got, s.want)
		}
		kept = append(kept, st.GPUs)
	}
	// GPUs handed out earlier are not changed by later frames.
	if got := leaseIDs(before); got != "gpu0:a gpu1: cpu: queue:" {
		t.Errorf("the first GPUs became %s", got)
	}
	for i, g := range kept {
		if got := leaseIDs(g); got != steps[i].want {
			t.Errorf("GPUs after step %d became %s, want %s", i, got, steps[i].want)
		}
	}
	st.applyAccounts(api.MonitorAccounts{Accounts: []api.Account{{UUID: "GPU-1", LeasedBytes: 5}}})
	if st.GPUs.GPUs[1].Accounting.LeasedBytes != 5 || kept[len(kept)-1].GPUs[1].Accounting.LeasedBytes != 0 {
		t.Error("accounts frame not applied, or applied to GPUs handed out before")
	}
	st.applyReadings(api.MonitorReadings{GPUs: []api.MonitorGPU{{GPUReading: api.GPUReading{UUID: "GPU-0", UsedBytes: 9}, HeldBytes: 3}},
		Held: []api.Hold{{LeaseID: "x", GPUUUID: "GPU-0", Bytes: 3}}})
	g0 := st.GPUs.GPUs[0]
	if g0.UsedBytes != 9 || g0.HeldBytes != 3 || len(st.GPUs.Held) != 1 || !slices.ContainsFunc(g0.Leases, func(l api.Lease) bool { return l.ID == "e" }) {
		t.Errorf("readings frame: %+v, held %v", g0, st.GPUs.Held)
	}
}
