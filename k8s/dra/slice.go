package dra

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/wsched/wsched/daemon/api"
)

// Device is one published GPU.
type Device struct {
	Name    string // gpu-<index>
	UUID    string
	Index   int
	Product string
	// MemoryBytes is the capacity "memory": what wsched can lease on the GPU
	// to Kubernetes (usable, less foreign memory and the leases of local
	// clients; the driver's own leases stay in: the scheduler subtracts what
	// it allocated), rounded down to the step.
	MemoryBytes int64
}

// Slice is this node's ResourceSlice: one pool, named after the node.
type Slice struct {
	Node    string
	Step    int64
	Devices []Device
}

// deviceName is the published name of GPU index.
func deviceName(index int) string { return "gpu-" + strconv.Itoa(index) }

// ownLease tells the driver's leases from others.
func ownLease(l api.Lease) bool { return l.Labels[LabelClaim] != "" }

// devices lists the placeable GPUs with their capacity, those with room for
// two steps at least.
func devices(gpus api.GPUs, step int64) []Device {
	var out []Device
	for _, g := range gpus.GPUs {
		if !g.Accounting.Placeable {
			continue
		}
		others := g.Accounting.LeasedBytes
		for _, l := range g.Leases {
			if ownLease(l) {
				others -= l.MemoryBytes
			}
		}
		free := max(g.Accounting.UsableBytes-g.Accounting.ForeignBytes-others, 0)
		if free < 2*step {
			// The API server refuses a device whose capacity is below the
			// request policy's min + step; a full GPU leaves the slice.
			continue
		}
		out = append(out, Device{
			Name: deviceName(g.Index), UUID: g.UUID, Index: g.Index, Product: g.Name,
			MemoryBytes: free / step * step,
		})
	}
	return out
}

// Object is the slice as a resource.k8s.io/v1 ResourceSlice (JSON-ready).
func (s Slice) Object() map[string]any {
	devs := make([]any, 0, len(s.Devices))
	for _, d := range s.Devices {
		devs = append(devs, map[string]any{
			"name": d.Name,
			"attributes": map[string]any{
				"uuid":        map[string]any{"string": d.UUID},
				"index":       map[string]any{"int": d.Index},
				"productName": map[string]any{"string": d.Product},
			},
			"capacity": map[string]any{
				"memory": map[string]any{
					"value": strconv.FormatInt(d.MemoryBytes, 10),
					"requestPolicy": map[string]any{
						"default":    strconv.FormatInt(s.Step, 10),
						"validRange": map[string]any{"min": strconv.FormatInt(s.Step, 10), "step": strconv.FormatInt(s.Step, 10)},
					},
				},
			},
			"allowMultipleAllocations": true,
		})
	}
	return map[string]any{
		"apiVersion": "resource.k8s.io/v1",
		"kind":       "ResourceSlice",
		"metadata":   map[string]any{"name": s.Name()},
		"spec": map[string]any{
			"driver":   DriverName,
			"nodeName": s.Node,
			"pool":     map[string]any{"name": s.Node, "generation": 1, "resourceSliceCount": 1},
			"devices":  devs,
		},
	}
}

// Name is the slice's object name.
func (s Slice) Name() string { return fmt.Sprintf("%s-%s", s.Node, DriverName) }

func sameDevices(a, b []Device) bool { return slices.Equal(a, b) }
