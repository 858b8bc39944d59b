package simtest

import (
	"context"
	"testing"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/placement"
)

func TestEngine(t *testing.T) {
	eng, sim := Engine(t, GPUs(8*units.GiB, 4*units.GiB), func(o *placement.Options) {
		o.Placement.Reserved, o.Placement.SafetyFactor = 0, 1
	})
	if sim == nil {
		t.Fatal("no sim")
	}
	l, err := eng.Acquire(context.Background(), placement.Request{Bytes: 6 * units.GiB, Holder: placement.Holder{PID: 1}})
	if err != nil || l.GPUIndex != 0 {
		t.Fatalf("acquire: %+v %v", l, err)
	}
	if v := eng.View(); len(v.GPUs) != 2 || v.GPUs[1].Name != "sim1" {
		t.Errorf("view: %+v", v)
	}
}
