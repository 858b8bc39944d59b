package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
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

// monitorEvent is a "placement" frame: the event alone (its lease is the
// delta); the GPUs' accounting follows in an "accounts" frame.
type monitorEvent struct {
	Event api.Event `json:"event"`
}

// Monitor stream pacing: one "accounts" frame per burst of placement
// events (accountsDelay after its first event), and a full "gpus" frame at
// most every fullEvery while anything changed. A frame's cost thus does not
// grow with the leases, but for the full ones.
// Placement frames are flushed flushDelay after the first of a batch.
const (
	accountsDelay = 50 * time.Millisecond
	flushDelay    = 10 * time.Millisecond
	fullEvery     = 5 * time.Second
)

// monitorEvents streams what the monitor page and `wsched top` show, as
// deltas (see daemon/api/monitor.go): a "snapshot" frame, then a
// "placement" frame per placement event (the event only), an "accounts"
// frame after each burst of them, a "readings" frame when a new reading
// was adopted, a full "gpus" frame at most every fullEvery while anything
// changed, and a "job" frame for every job state or progress change the
// client may see. It ends with "lagged" when the client fell behind
// (reload).
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
	if err := m.write(event, v); err != nil {
		return err
	}
	return m.rc.Flush()
}

// write writes a frame without flushing it.
func (m *monitorStream) write(event string, v any) error {
	m.seq++
	if m.enc == nil {
		m.enc = newSSEEncoder()
	}
	if err := m.enc.write(m.w, m.seq, event, v); err != nil {
		return fmt.Errorf("write %s frame: %w", event, err)
	}
	return nil
}

// placements writes the placement frame of ev and of the events already
// waiting behind it, unflushed: the caller flushes within flushDelay, so
// that under a burst a stream makes one write per batch, not per event. It
// reports whether the stream's events closed (the stream lagged).
func (m *monitorStream) placements(ev placement.Event, placed <-chan placement.Event) (closed bool, err error) {
	for {
		if err := m.write("placement", monitorEvent{Event: eventFor(m.peer, ev)}); err != nil {
			return false, err
		}
		var ok bool
		select {
		case ev, ok = <-placed:
			if !ok {
				return true, nil
			}
		default:
			return false, nil
		}
	}
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
	burst := time.NewTimer(time.Hour)
	burst.Stop()
	defer burst.Stop()
	var burstC <-chan time.Time // armed while a burst's accounts are due
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	defer flush.Stop()
	var flushC <-chan time.Time // armed while placement frames wait in the buffer
	lastFull, changed, idle := time.Now(), false, 0
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
			var closed bool
			if closed, err = m.placements(ev, placed); closed && err == nil {
				_ = m.send("lagged", struct{}{})
				return
			}
			if flushC == nil {
				flush.Reset(flushDelay)
				flushC = flush.C
			}
			if changed = true; burstC == nil {
				burst.Reset(accountsDelay)
				burstC = burst.C
			}
		case <-flushC:
			flushC = nil
			err = m.rc.Flush()
		case <-burstC:
			burstC = nil
			err = m.accounts()
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
			v := m.s.eng.View()
			fresh := !v.Taken.Equal(taken)
			changed = changed || fresh
			switch {
			case changed && time.Since(lastFull) >= fullEvery:
				taken, lastFull, changed, idle = v.Taken, time.Now(), false, 0
				err = m.send("gpus", m.s.gpusBody(m.peer, v))
			case fresh:
				taken, idle = v.Taken, 0
				err = m.send("readings", readingsBody(v))
			default:
				err = m.keepalive(every, &idle)
			}
		}
		if err != nil {
			return
		}
	}
}

// keepalive writes a comment after 15 s without frames.
func (m *monitorStream) keepalive(every time.Duration, idle *int) error {
	if *idle++; *idle*int(every/time.Millisecond) < 15000 {
		return nil
	}
	*idle = 0
	if _, err := fmt.Fprint(m.w, ": keepalive\n\n"); err != nil {
		return err
	}
	return m.rc.Flush()
}

// accounts sends each GPU's accounting as last published, accountsDelay
// after a burst's first event: the engine is not entered (no Ping), so
// monitors cost its owner loop nothing; a step still unpublished then shows
// in the next frame. O(GPUs).
func (m *monitorStream) accounts() error {
	accts, _ := m.s.eng.Accounts()
	out := api.MonitorAccounts{Accounts: make([]api.Account, 0, len(accts))}
	for _, a := range accts {
		out.Accounts = append(out.Accounts, api.Account(a))
	}
	return m.send("accounts", out)
}

// readingsBody is a "readings" frame: each GPU's reading, accounting and
// held memory, the holds and the per-uid use; no leases.
func readingsBody(v placement.View) api.MonitorReadings {
	out := api.MonitorReadings{Taken: v.Taken, GPUs: make([]api.MonitorGPU, 0, len(v.GPUs)), Held: []api.Hold{}, UIDs: uidUses(v.UIDs)}
	index := map[string]int{}
	for _, g := range v.GPUs {
		gpu := convert.GPU(g.Reading, g.Account, nil)
		out.GPUs = append(out.GPUs, api.MonitorGPU{GPUReading: gpu.GPUReading, Accounting: gpu.Accounting, HeldBytes: g.HeldBytes})
		index[g.UUID] = g.Index
	}
	for _, h := range v.Held {
		out.Held = append(out.Held, api.Hold{LeaseID: h.LeaseID, GPUIndex: index[h.GPU], GPUUUID: h.GPU, Bytes: h.Bytes})
	}
	return out
}
