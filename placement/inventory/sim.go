package inventory

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/wsched/wsched/internal/units"
)

// Sim is a simulated machine: the GPUs of [[inventory.sim]] served as an
// nvml.Interface built from go-nvml's mock package, so the NVML provider reads
// it exactly as it reads real GPUs. Its processes and load can be changed
// while it runs (demos, tests of reconciliation).
type Sim struct {
	mu     sync.Mutex
	gpus   []*simGPU
	driver string // "" reads as "sim"
}

type simGPU struct {
	cfg      SimGPU
	uuid     string
	overhead int64 // memory used by no process (driver, context)
	procs    []SimProcess
	util     int
	temp     int
}

// NewSim builds a simulated machine from config. A GPU's `used` beyond what
// its processes use counts as driver overhead.
func NewSim(gpus []SimGPU) *Sim {
	s := &Sim{}
	for i, c := range gpus {
		g := &simGPU{cfg: c, uuid: c.UUID, procs: slices.Clone(c.Processes), util: c.Utilization, temp: c.Temperature}
		if g.uuid == "" {
			g.uuid = SimUUID(i)
		}
		if g.cfg.Name == "" {
			g.cfg.Name = "Simulated GPU"
		}
		if c.Used != nil {
			g.overhead = int64(*c.Used) - g.procUsed()
		}
		s.gpus = append(s.gpus, g)
	}
	return s
}

// SimUUID is the UUID a simulated GPU without a configured one gets: stable
// across runs, formatted like NVML's.
func SimUUID(index int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("wsched-sim-gpu-%d", index)))
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func (g *simGPU) procUsed() int64 {
	var sum int64
	for _, p := range g.procs {
		sum += int64(p.Used)
	}
	return sum
}

// SetProcess adds or updates a compute process on GPU index.
func (s *Sim) SetProcess(index, pid int, name string, used int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index < 0 || index >= len(s.gpus) {
		return fmt.Errorf("sim: no GPU %d", index)
	}
	g := s.gpus[index]
	p := SimProcess{PID: pid, Name: name, Used: units.Bytes(used)}
	if i := slices.IndexFunc(g.procs, func(q SimProcess) bool { return q.PID == pid }); i >= 0 {
		g.procs[i] = p
	} else {
		g.procs = append(g.procs, p)
	}
	if g.overhead+g.procUsed() > int64(g.cfg.Memory) {
		return fmt.Errorf("sim: GPU %d: processes exceed its memory", index)
	}
	return nil
}

// RemoveProcess removes a process from every GPU (it exited).
func (s *Sim) RemoveProcess(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		g.procs = slices.DeleteFunc(g.procs, func(q SimProcess) bool { return q.PID == pid })
	}
}

// SetLoad sets utilization (%) and temperature (°C) of GPU index.
func (s *Sim) SetLoad(index, utilization, temperature int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index >= 0 && index < len(s.gpus) {
		s.gpus[index].util, s.gpus[index].temp = utilization, temperature
	}
}

// SetDriver sets the driver version the simulated machine reports
// (default "sim", which has no major version).
func (s *Sim) SetDriver(version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.driver = version
}

func (s *Sim) driverVersion() (string, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cmp.Or(s.driver, "sim"), nvml.SUCCESS
}

// Interface returns the simulated machine as an nvml.Interface.
func (s *Sim) Interface() nvml.Interface {
	devices := make([]nvml.Device, len(s.gpus))
	for i := range s.gpus {
		devices[i] = s.device(i)
	}
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: s.driverVersion,
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], nvml.SUCCESS
		},
		SystemGetProcessNameFunc: s.processName,
	}
}

func (s *Sim) processName(pid int) (string, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		for _, p := range g.procs {
			if p.PID == pid && p.Name != "" {
				return p.Name, nvml.SUCCESS
			}
		}
	}
	return "", nvml.ERROR_NOT_FOUND
}

func (s *Sim) device(i int) *mock.Device {
	g := s.gpus[i]
	locked := func(f func()) { s.mu.Lock(); defer s.mu.Unlock(); f() }
	return &mock.Device{
		GetIndexFunc: func() (int, nvml.Return) { return i, nvml.SUCCESS },
		GetUUIDFunc:  func() (string, nvml.Return) { return g.uuid, nvml.SUCCESS },
		GetNameFunc:  func() (string, nvml.Return) { return g.cfg.Name, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (m nvml.Memory, _ nvml.Return) {
			locked(func() {
				used := uint64(g.overhead + g.procUsed())
				m = nvml.Memory{Total: uint64(g.cfg.Memory), Used: used, Free: uint64(g.cfg.Memory) - used}
			})
			return m, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (u nvml.Utilization, _ nvml.Return) {
			locked(func() { u = nvml.Utilization{Gpu: uint32(g.util)} })
			return u, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (t uint32, _ nvml.Return) {
			locked(func() { t = uint32(g.temp) })
			return t, nvml.SUCCESS
		},
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if g.cfg.MIG {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() (ps []nvml.ProcessInfo, _ nvml.Return) {
			locked(func() {
				for _, p := range g.procs {
					ps = append(ps, nvml.ProcessInfo{Pid: uint32(p.PID), UsedGpuMemory: uint64(p.Used)})
				}
			})
			return ps, nvml.SUCCESS
		},
	}
}
