package host

import (
	"github.com/wsched/wsched/plugins"
)

// EventType says what happened to an instance.
type EventType string

// Event types.
const (
	EventStarted   EventType = "started"   // process up, model loaded
	EventCrashed   EventType = "crashed"   // process died or answered ErrUnavailable
	EventRestarted EventType = "restarted" // new process under the same lease, model reloaded
	EventGivenUp   EventType = "given_up"  // no more restarts, or the lease ended
	EventStopped   EventType = "stopped"   // process stopped and lease released
)

// Event reports a change in an instance's life (Options.OnEvent).
type Event struct {
	Type     EventType
	Instance string
	Backend  string
	Model    string
	Lease    string
	GPU      string // UUID, or "cpu"
	PID      int    // the process concerned (crashed: the one that died)
	During   string // crashed: what noticed ("transcribe", "health check", …)
	Reason   string // stopped: why
	Err      error  // crashed, given_up: the cause
	Restarts int
	Memory   plugins.MemoryReport // started, restarted: the backend's report
}

// report logs ev for w and passes it to Options.OnEvent.
func (h *Host) report(w *worker, ev Event) {
	ev.Instance, ev.Backend, ev.Model, ev.Lease, ev.GPU = w.id, w.bin.Name, w.spec.Load.ModelPath, w.lease.ID, w.lease.GPU
	h.mu.Lock()
	ev.Restarts = w.restarts
	h.mu.Unlock()
	attrs := []any{"instance", ev.Instance, "pid", ev.PID}
	switch ev.Type {
	case EventStarted:
		w.log.Info("backend started", append(attrs, "model", ev.Model, "gpu", w.lease.GPUIndex, "lease_bytes", w.lease.Bytes,
			"reported_bytes", max(ev.Memory.TotalBytes, ev.Memory.Sum()))...)
	case EventCrashed:
		w.log.Error("backend crashed", append(attrs, "during", ev.During, "err", ev.Err)...)
	case EventRestarted:
		w.log.Info("backend restarted under the same lease", append(attrs, "restarts", ev.Restarts)...)
	case EventGivenUp:
		w.log.Error("backend given up", append(attrs, "restarts", ev.Restarts, "err", ev.Err)...)
	case EventStopped:
		w.log.Info("backend stopped, lease released", append(attrs, "reason", ev.Reason)...)
	}
	if h.opts.OnEvent != nil {
		h.opts.OnEvent(ev)
	}
}
