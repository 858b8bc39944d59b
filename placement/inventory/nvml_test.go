package inventory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// newDGX returns go-nvml's simulated 8×A100 server with the readings the
// dgxa100 mock leaves unset filled in: memory use, utilization, temperature
// and one compute process per GPU.
func newDGX(t *testing.T) *dgxa100.Server {
	t.Helper()
	s := dgxa100.New()
	s.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) { return "/usr/bin/python3", nvml.SUCCESS }
	for i, d := range s.Devices {
		dev := d.(*dgxa100.Device)
		used := uint64(i+1) << 30
		dev.MemoryInfo = nvml.Memory{Total: dev.MemoryInfo.Total, Used: used, Free: dev.MemoryInfo.Total - used}
		util, temp, pid := uint32(10*i), uint32(30+i), uint32(1000+i)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: util}, nvml.SUCCESS }
		dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return temp, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: pid, UsedGpuMemory: used - 256<<20}}, nvml.SUCCESS
		}
	}
	return s
}

func TestNVMLOnDGXA100(t *testing.T) {
	s := newDGX(t)
	fixed := time.Date(2026, 11, 21, 6, 0, 0, 0, time.UTC)
	p, err := NewNVML(s, WithClock(func() time.Time { return fixed }))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	snap, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.GPUs) != 8 || snap.Driver != "550.54.15" || !snap.Taken.Equal(fixed) || snap.Provider != "nvml" {
		t.Fatalf("snapshot header: %d GPUs, driver %q, taken %v, provider %q", len(snap.GPUs), snap.Driver, snap.Taken, snap.Provider)
	}
	for i, g := range snap.GPUs {
		dev := s.Devices[i].(*dgxa100.Device)
		if g.Index != i || g.UUID != dev.UUID || g.Name != "Mock NVIDIA A100-SXM4-40GB" || !g.IsHealthy() {
			t.Errorf("GPU %d identity: %+v", i, g)
		}
		if g.TotalBytes != 42949672960 || g.UsedBytes != int64(i+1)<<30 || g.FreeBytes != g.TotalBytes-g.UsedBytes {
			t.Errorf("GPU %d memory: total %d used %d free %d", i, g.TotalBytes, g.UsedBytes, g.FreeBytes)
		}
		if *g.UtilizationPct != 10*i || *g.TemperatureC != 30+i || g.MIG != MIGDisabled {
			t.Errorf("GPU %d optional readings: util %d temp %d mig %s", i, *g.UtilizationPct, *g.TemperatureC, g.MIG)
		}
		if len(g.Processes) != 1 || g.Processes[0].PID != 1000+i || g.Processes[0].Name != "python3" || g.Processes[0].UsedBytes != int64(i+1)<<30-256<<20 {
			t.Errorf("GPU %d processes: %+v", i, g.Processes)
		}
	}
}

func TestNVMLOneGPUFails(t *testing.T) {
	s := newDGX(t)
	bad := s.Devices[3].(*dgxa100.Device)
	bad.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }
	p, err := NewNVML(s)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatalf("one failing GPU must not fail the snapshot: %v", err)
	}
	if len(snap.GPUs) != 8 {
		t.Fatalf("a failing GPU hid others: %d GPUs", len(snap.GPUs))
	}
	for i, g := range snap.GPUs {
		if i == 3 {
			want := "get memory info on GPU " + bad.UUID + ": ERROR_UNKNOWN"
			if g.IsHealthy() || g.Reason != want {
				t.Errorf("GPU 3: health %q reason %q, want unhealthy %q", g.Health, g.Reason, want)
			}
			continue
		}
		if !g.IsHealthy() {
			t.Errorf("GPU %d unhealthy: %s", i, g.Reason)
		}
	}
}

func TestNVMLOptionalReadingsAndMIG(t *testing.T) {
	s := newDGX(t)
	d0 := s.Devices[0].(*dgxa100.Device)
	d0.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d0.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
	}
	s.Devices[1].(*dgxa100.Device).MigMode = nvml.DEVICE_MIG_ENABLE
	lost := s.Devices[2].(*dgxa100.Device)
	lost.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	p, _ := NewNVML(s)
	snap, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g0, g1, g2 := snap.GPUs[0], snap.GPUs[1], snap.GPUs[2]
	if g0.TemperatureC != nil || !g0.IsHealthy() || !g0.Processes[0].UsedUnknown || g0.Processes[0].UsedBytes != 0 {
		t.Errorf("GPU 0: unsupported sensor or unknown process memory mishandled: %+v", g0)
	}
	if g1.MIG != MIGEnabled || !g1.IsHealthy() {
		t.Errorf("GPU 1: MIG mode %q", g1.MIG)
	}
	if g2.IsHealthy() || !strings.Contains(g2.Reason, "ERROR_GPU_IS_LOST") {
		t.Errorf("GPU 2: lost GPU not unhealthy: %+v", g2)
	}
}

func TestNVMLMissingLibrary(t *testing.T) {
	_, err := NewNVML(nvml.New(nvml.WithLibraryPath("/nonexistent/libnvidia-ml.so.1")))
	if !errors.Is(err, ErrNoLibrary) || err.Error() != ErrNoLibrary.Error() {
		t.Fatalf("error = %v, want exactly %v", err, ErrNoLibrary)
	}
}

func TestNVMLClose(t *testing.T) {
	s := newDGX(t)
	shutdowns := 0
	s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	p, _ := NewNVML(s)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = p.Close()
	if shutdowns != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns)
	}
	if _, err := p.Snapshot(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("snapshot after close: %v", err)
	}
}
