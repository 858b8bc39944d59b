package convert

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/placement/inventory"
)

// fill sets every field reachable from v to a non-zero value, so a field
// the wire type lacks (or types differently) shows in the JSON.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if depth > 4 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("completed") // a valid job state, priority-free
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(1 + depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(7 + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	}
}

// roundTrip marshals a filled engine value, decodes it strictly into the
// wire type and checks that re-encoding gives the same JSON.
func roundTrip[E, W any](t *testing.T, name string, fix func(*E)) {
	t.Helper()
	var src E
	fill(reflect.ValueOf(&src).Elem(), 0)
	if fix != nil {
		fix(&src)
	}
	want, err := json.Marshal(src)
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	var wire W
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		t.Fatalf("%s: the wire type does not take the engine's JSON: %v\n%s", name, err, want)
	}
	got, _ := json.Marshal(wire)
	if !bytes.Equal(got, want) {
		t.Errorf("%s: wire JSON differs\n got %s\nwant %s", name, got, want)
	}
}

// TestWireTypesMatch keeps the client's wire types equal to what the daemon
// encodes from the engines' values.
func TestWireTypesMatch(t *testing.T) {
	roundTrip[jobs.Job, api.Job](t, "job", func(j *jobs.Job) { j.Spec.Priority = placement.High })
	roundTrip[jobs.Event, api.JobEvent](t, "job event", func(e *jobs.Event) { e.Job.Spec.Priority = placement.Low })
	roundTrip[transcript.Transcript, transcript.Transcript](t, "transcript", nil)
	roundTrip[estimator.Request, api.EstimateRequest](t, "estimate request", nil)
	roundTrip[estimator.Result, api.Estimate](t, "estimate", nil)
	roundTrip[inventory.GPU, api.GPUReading](t, "gpu reading", nil)
	roundTrip[placement.Account, api.Account](t, "account", nil)
	roundTrip[placement.Stats, api.Stats](t, "stats", nil)
	roundTrip[placement.Holder, api.Holder](t, "holder", nil)
	roundTrip[estimator.Key, api.EstimateKey](t, "estimate key", nil)
}

func TestGPU(t *testing.T) {
	var g inventory.GPU
	fill(reflect.ValueOf(&g).Elem(), 0)
	var a placement.Account
	fill(reflect.ValueOf(&a).Elem(), 0)
	got := GPU(g, a, []api.Lease{{ID: "l1"}})
	want, _ := json.Marshal(struct {
		inventory.GPU
		Accounting placement.Account `json:"accounting"`
		Leases     []api.Lease       `json:"leases"`
		HeldBytes  int64             `json:"held_bytes"` // set by the caller from the view
	}{g, a, []api.Lease{{ID: "l1"}}, 0})
	if b, _ := json.Marshal(got); !bytes.Equal(b, want) {
		t.Errorf("GPU JSON\n got %s\nwant %s", b, want)
	}
}

func TestFromLeaseEnv(t *testing.T) {
	l := placement.Lease{ID: "l1", State: placement.StateGranted, GPU: "GPU-1", Bytes: 1 << 30, GPUTotalBytes: 4 << 30}
	if got := FromLease(l); got.Env["CUDA_VISIBLE_DEVICES"] != "GPU-1" || got.Env["WSCHED_MEMORY_FRACTION"] != "0.2500" {
		t.Errorf("granted lease env = %v", got.Env)
	}
	l.State = placement.StateQueued
	if got := FromLease(l); got.Env != nil {
		t.Errorf("queued lease has env %v", got.Env)
	}
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "base", Precision: "f16", Beam: 5, Batch: 1, GPUModel: "x"}
	l.EstimateKey = &key
	want, _ := json.Marshal(key)
	if got, _ := json.Marshal(FromLease(l).EstimateKey); string(got) != string(want) {
		t.Errorf("estimate key %s, want %s", got, want)
	}
	if ev := FromEvent(placement.Event{Lease: placement.Lease{State: placement.StateGranted}}); ev.Lease.Env != nil {
		t.Errorf("event carries env %v", ev.Lease.Env)
	}
}
