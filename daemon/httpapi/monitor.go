package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/placement"
)

// monitorSnapshot is the first frame of GET /v1/monitor/events: the GPUs
// (with leases, queue and held memory), the jobs the client may see and the
// daemon's status.
type monitorSnapshot struct {
	GPUs   api.GPUs   `json:"gpus"`
	Jobs   []jobs.Job `json:"jobs"`
	Status api.Status `json:"status"`
}

// monitorEvent is a "placement" frame: the event and the GPUs after it.
type monitorEvent struct {
	Event api.Event `json:"event"`
	GPUs  api.GPUs  `json:"gpus"`
}

// monitorEvents streams what the monitor page and `wsched top` show: a
// "snapshot" frame, then a "placement" frame after every placement event
// (with the GPUs as that step left them), a "gpus" frame when a new reading
// was adopted, and a "job" frame for every job state or progress change the
// client may see. It ends with "lagged" when the client fell behind (reload).
func (s *Server) monitorEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	placed, stopPlaced, err := s.hub.subscribe(ctx, peerFrom(ctx))
	if err != nil {
		writeError(w, err)
		return
	}
	defer stopPlaced()
	jobEvents, stopJobs, err := s.jobs.Watch(ctx)
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	defer stopJobs()
	snap, err := s.monitorSnapshot(ctx, peerFrom(ctx))
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	st := &monitorStream{s: s, w: w, rc: http.NewResponseController(w), peer: peerFrom(ctx)}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if st.send("snapshot", snap) != nil {
		return
	}
	st.run(ctx, placed, jobEvents, snap.GPUs.Taken)
}

func (s *Server) monitorSnapshot(ctx context.Context, peer Peer) (monitorSnapshot, error) {
	all, err := s.jobs.List(ctx)
	if err != nil {
		return monitorSnapshot{}, err
	}
	snap := monitorSnapshot{GPUs: s.gpusBody(peer, s.eng.View()), Jobs: []jobs.Job{}, Status: s.statusBody()}
	for _, j := range all {
		if mayAccess(peer, j) == nil {
			j.Result = nil
			snap.Jobs = append(snap.Jobs, j)
		}
	}
	return snap, nil
}

// monitorStream writes one monitor client's frames.
type monitorStream struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	peer Peer
	seq  uint64
	enc  *sseEncoder
}

func (m *monitorStream) send(event string, v any) error {
	m.seq++
	if m.enc == nil {
		m.enc = newSSEEncoder()
	}
	if err := m.enc.write(m.w, m.seq, event, v); err != nil {
		return fmt.Errorf("write %s frame: %w", event, err)
	}
	return m.rc.Flush()
}

// run forwards events until the client goes away or a source closes. A new
// GPU reading is noticed at the inventory's refresh interval by comparing
// the published view's time (an atomic load; the engine is not entered).
func (m *monitorStream) run(ctx context.Context, placed <-chan placement.Event, jobEvents <-chan jobs.Event, taken time.Time) {
	every := m.s.cfg.Inventory.RefreshInterval.D()
	if every <= 0 {
		every = time.Second
	}
	tick := time.NewTimer(every)
	defer tick.Stop()
	idle := 0
	for {
		var err error
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-placed:
			if !ok {
				_ = m.send("lagged", struct{}{})
				return
			}
			err = m.placement(ctx, ev)
			taken = m.s.eng.View().Taken
		case ev, ok := <-jobEvents:
			if !ok {
				_ = m.send("lagged", struct{}{})
				return
			}
			if mayAccess(m.peer, ev.Job) == nil {
				err = m.send("job", ev)
			}
		case <-tick.C:
			tick.Reset(every)
			if v := m.s.eng.View(); !v.Taken.Equal(taken) {
				taken, idle = v.Taken, 0
				err = m.send("gpus", m.s.gpusBody(m.peer, v))
			} else if idle++; idle*int(every/time.Millisecond) >= 15000 {
				idle = 0
				_, err = fmt.Fprint(m.w, ": keepalive\n\n")
				if err == nil {
					err = m.rc.Flush()
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// placement sends a placement event with the GPUs as its step left them:
// Ping returns after the engine's current step, which publishes the view.
func (m *monitorStream) placement(ctx context.Context, ev placement.Event) error {
	if err := m.s.eng.Ping(ctx); err != nil {
		return fmt.Errorf("wait for the placement step: %w", err)
	}
	return m.send("placement", monitorEvent{Event: eventFor(m.peer, ev), GPUs: m.s.gpusBody(m.peer, m.s.eng.View())})
}
