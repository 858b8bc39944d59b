package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// TestPreferredAllocation over gRPC on the sim 8×4090 (the most free on one
// GPU: 21 whole GiB, GPU 1, nearly idle): the kubelet's must-include IDs first, then the
// lowest-numbered; a request no single GPU holds is refused (the kubelet then
// fails the pod's admission before any Allocate).
func TestPreferredAllocation(t *testing.T) {
	n, _ := startNode(t)
	ctx := context.Background()
	opts, err := n.plugin.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable {
		t.Fatalf("options %v, %v: want GetPreferredAllocationAvailable", opts, err)
	}
	var avail []string
	for i := 30; i >= 0; i-- {
		avail = append(avail, fmt.Sprintf("u%d", i))
	}
	ask := func(size int, must ...string) ([]string, error) {
		resp, err := n.plugin.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
			ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
				AvailableDeviceIDs: avail, MustIncludeDeviceIDs: must, AllocationSize: int32(size),
			}},
		})
		if err != nil {
			return nil, err
		}
		return resp.ContainerResponses[0].DeviceIDs, nil
	}
	got, err := ask(4, "u12")
	if want := []string{"u12", "u0", "u1", "u2"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("preferred 4 with u12: %v, %v; want %v", got, err, want)
	}
	if got, err := ask(21); err != nil || len(got) != 21 || got[20] != "u20" {
		t.Fatalf("preferred 21 (fits GPU 1): %v, %v", got, err)
	}
	if got, err := ask(22); err == nil || !strings.Contains(err.Error(), ErrNoMemory.Error()) {
		t.Fatalf("preferred 22 (no GPU holds it): %v, %v; want %v", got, err, ErrNoMemory)
	}
}

func TestPickIDs(t *testing.T) {
	for _, c := range []struct {
		must, avail, want []string
		size              int
	}{
		{nil, []string{"u10", "u2", "u1"}, []string{"u1", "u2"}, 2},
		{[]string{"u10"}, []string{"u10", "u2", "u1"}, []string{"u10", "u1"}, 2},
		{nil, []string{"x", "u3"}, []string{"x", "u3"}, 2},
		{nil, []string{"u3"}, []string{"u3"}, 2},
	} {
		if got := pickIDs(c.must, c.avail, c.size); !slices.Equal(got, c.want) {
			t.Errorf("pickIDs(%v, %v, %d) = %v, want %v", c.must, c.avail, c.size, got, c.want)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrNoMemory), ErrNoMemory) {
		t.Fatal("ErrNoMemory does not wrap")
	}
}
