package inventory

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// valueNotAvailable is NVML_VALUE_NOT_AVAILABLE for unsigned long long fields.
const valueNotAvailable = ^uint64(0)

// NVML reads GPUs through an nvml.Interface: the real library, or the sim's
// go-nvml mock. It initialises NVML once in NewNVML and shuts it down on Close.
type NVML struct {
	lib  nvml.Interface
	name string
	now  func() time.Time

	mu     sync.Mutex // serializes NVML calls and guards closed
	closed bool
}

var _ Provider = (*NVML)(nil)

// NVMLOption configures NewNVML.
type NVMLOption func(*NVML)

// WithName sets the provider name reported in snapshots (default "nvml").
func WithName(name string) NVMLOption { return func(n *NVML) { n.name = name } }

// WithClock sets the clock that stamps snapshots (default time.Now).
func WithClock(now func() time.Time) NVMLOption { return func(n *NVML) { n.now = now } }

// NewNVML initialises lib. A missing library gives ErrNoLibrary, alone.
func NewNVML(lib nvml.Interface, opts ...NVMLOption) (*NVML, error) {
	n := &NVML{lib: lib, name: "nvml", now: time.Now}
	for _, o := range opts {
		o(n)
	}
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
		return n, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, ErrNoLibrary
	default:
		return nil, fmt.Errorf("initialize NVML: %w", ret)
	}
}

// Name implements Provider.
func (n *NVML) Name() string { return n.name }

// Close shuts NVML down; later calls do nothing.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shut down NVML: %w", ret)
	}
	return nil
}

// Snapshot implements Provider. NVML calls are synchronous and short; ctx is
// checked between GPUs.
func (n *NVML) Snapshot(ctx context.Context) (Snapshot, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return Snapshot{}, ErrClosed
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return Snapshot{}, fmt.Errorf("count GPUs: %w", ret)
	}
	snap := Snapshot{Provider: n.name, GPUs: make([]GPU, 0, count)}
	if v, ret := n.lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		snap.Driver = v
	}
	for i := 0; i < count; i++ {
		if err := ctx.Err(); err != nil {
			return Snapshot{}, fmt.Errorf("read GPU %d: %w", i, err)
		}
		snap.GPUs = append(snap.GPUs, n.readGPU(i))
	}
	snap.Taken = n.now()
	return snap, nil
}

// gpuError is an NVML failure on one GPU, converted to a Go error at this one
// boundary: it says what was attempted and on which GPU.
func gpuError(op string, g GPU, ret nvml.Return) error {
	id := g.UUID
	if id == "" {
		id = fmt.Sprintf("index %d", g.Index)
	}
	return fmt.Errorf("%s on GPU %s: %w", op, id, ret)
}

// readGPU reads one device. Failures of required queries mark the GPU
// unhealthy with the reason; optional readings are left nil when the board
// does not support them.
func (n *NVML) readGPU(i int) GPU {
	g := GPU{Index: i, Health: Healthy, MIG: MIGUnsupported, Processes: []Process{}}
	dev, ret := n.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return g.unhealthy(gpuError("get device handle", g, ret))
	}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g.unhealthy(gpuError("get UUID", g, ret))
	}
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return g.unhealthy(gpuError("get name", g, ret))
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g.unhealthy(gpuError("get memory info", g, ret))
	}
	g.TotalBytes, g.UsedBytes, g.FreeBytes = int64(mem.Total), int64(mem.Used), int64(mem.Free)
	if err := n.readOptional(dev, &g); err != nil {
		return g.unhealthy(err)
	}
	procs, ret := dev.GetComputeRunningProcesses()
	switch ret {
	case nvml.SUCCESS:
		g.Processes = n.processes(procs)
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION:
	default:
		return g.unhealthy(gpuError("list compute processes", g, ret))
	}
	return g
}

// readOptional fills utilization, temperature and MIG mode. Only a lost GPU
// is an error here: boards that lack a sensor simply leave the field nil.
func (n *NVML) readOptional(dev nvml.Device, g *GPU) error {
	if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		v := int(u.Gpu)
		g.UtilizationPct = &v
	} else if ret == nvml.ERROR_GPU_IS_LOST {
		return gpuError("get utilization", *g, ret)
	}
	if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		v := int(t)
		g.TemperatureC = &v
	} else if ret == nvml.ERROR_GPU_IS_LOST {
		return gpuError("get temperature", *g, ret)
	}
	if cur, _, ret := dev.GetMigMode(); ret == nvml.SUCCESS {
		g.MIG = MIGDisabled
		if cur == nvml.DEVICE_MIG_ENABLE {
			g.MIG = MIGEnabled
		}
	}
	return nil
}

func (n *NVML) processes(infos []nvml.ProcessInfo) []Process {
	out := make([]Process, 0, len(infos))
	for _, p := range infos {
		proc := Process{PID: int(p.Pid)}
		if p.UsedGpuMemory == valueNotAvailable {
			proc.UsedUnknown = true
		} else {
			proc.UsedBytes = int64(p.UsedGpuMemory)
		}
		if name, ret := n.lib.SystemGetProcessName(int(p.Pid)); ret == nvml.SUCCESS {
			proc.Name = filepath.Base(name)
		}
		out = append(out, proc)
	}
	return out
}

func (g GPU) unhealthy(err error) GPU {
	g.Health = Unhealthy
	g.Reason = err.Error()
	return g
}

// IsNoLibrary reports whether err means NVML is not installed.
func IsNoLibrary(err error) bool { return errors.Is(err, ErrNoLibrary) }
