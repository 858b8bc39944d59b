package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/placement"
)

// traceEvents bounds the lease events kept for GET /v1/jobs/trace.
const traceEvents = 1 << 16

// traceRecorded are the lease events a trace keeps.
var traceRecorded = []placement.EventType{placement.EventQueued, placement.EventGranted, placement.EventResized,
	placement.EventReleased, placement.EventExpired, placement.EventRejected}

// traceRecorder keeps the newest lease events. RunTrace's goroutine owns
// them; GET /v1/jobs/trace asks it for a copy.
type traceRecorder struct {
	asks chan chan traceCopy
}

type traceCopy struct {
	events  []placement.Event
	dropped int
}

func newTraceRecorder() *traceRecorder { return &traceRecorder{asks: make(chan chan traceCopy)} }

// RunTrace records lease events for GET /v1/jobs/trace until ctx ends; a
// subscription dropped for falling behind is renewed (the gap counted).
func (s *Server) RunTrace(ctx context.Context) error {
	var kept []placement.Event
	dropped := 0
	for ctx.Err() == nil {
		evs, stop, err := s.eng.Subscribe(ctx, traceRecorded...)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("trace: subscribe to placement events: %w", err)
		}
		kept, dropped = s.record(ctx, evs, kept, dropped)
		stop()
		dropped++ // the events missed while renewing are not known: at least one
	}
	return nil
}

// record appends events to kept (the newest traceEvents) and answers asks
// until ctx ends or the subscription closes.
func (s *Server) record(ctx context.Context, evs <-chan placement.Event, kept []placement.Event, dropped int) ([]placement.Event, int) {
	for {
		select {
		case <-ctx.Done():
			return kept, dropped
		case ev, ok := <-evs:
			if !ok {
				return kept, dropped
			}
			if len(kept) == traceEvents {
				kept = slices.Delete(kept, 0, traceEvents/8) // amortised: drop an eighth at once
				dropped += traceEvents / 8
			}
			kept = append(kept, ev)
		case ask := <-s.trace.asks:
			ask <- traceCopy{events: slices.Clone(kept), dropped: dropped}
		}
	}
}

// leaseEvents is the recorder's copy; none when it does not answer.
func (s *Server) leaseEvents(ctx context.Context) traceCopy {
	ask := make(chan traceCopy, 1)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case s.trace.asks <- ask:
		return <-ask
	case <-ctx.Done():
		return traceCopy{}
	}
}

// getTrace is GET /v1/jobs/trace: the jobs the client may see and the
// lease events, as JSON Lines `wsched sim --trace` reads (daemon/api/trace.go).
func (s *Server) getTrace(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	all, err := s.jobs.List(r.Context())
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	var js []jobs.Job
	for _, j := range all {
		if mayAccess(peer, j) == nil {
			js = append(js, j)
		}
	}
	slices.SortFunc(js, func(a, b jobs.Job) int { return a.Created.Compare(b.Created) })
	evs := s.leaseEvents(r.Context())
	origin := traceOrigin(js, evs.events)
	w.Header().Set("Content-Type", api.TraceContentType)
	enc := json.NewEncoder(w)
	err = enc.Encode(api.TraceHeader{Kind: api.TraceKindHeader, Origin: origin, Jobs: len(js), LeaseEvents: len(evs.events), LeaseEventsDropped: evs.dropped})
	for _, j := range js {
		err = errors.Join(err, enc.Encode(traceJob(j, origin)))
	}
	for _, ev := range evs.events {
		err = errors.Join(err, enc.Encode(traceLease(peer, ev, origin)))
	}
	if err != nil {
		s.log.Debug("trace answer cut short", "err", err)
	}
}

// traceOrigin is the earliest instant of the trace.
func traceOrigin(js []jobs.Job, evs []placement.Event) time.Time {
	var t time.Time
	if len(js) > 0 {
		t = js[0].Created
	}
	if len(evs) > 0 && (t.IsZero() || evs[0].Time.Before(t)) {
		t = evs[0].Time
	}
	return t
}

func traceJob(j jobs.Job, origin time.Time) api.TraceJob {
	out := api.TraceJob{Kind: api.TraceKindJob, Arrival: j.Created.Sub(origin).Seconds(), AudioSeconds: j.AudioSeconds,
		Model: j.Spec.Model, Priority: j.Spec.Priority.String(), UID: j.Spec.Owner.UID,
		ID: j.ID, State: string(j.State), Attempts: j.Attempts, Backend: j.Backend, GPUIndex: j.GPUIndex, MemoryBytes: j.MemoryBytes}
	if out.AudioSeconds <= 0 && j.Result != nil { // unknown at admission: the transcript says
		out.AudioSeconds = j.Result.Duration.Seconds()
	}
	if t, ok := j.Timings[jobs.Loading]; ok {
		out.WaitSeconds = t.Entered.Sub(j.Created).Seconds()
	}
	if t, ok := j.Timings[jobs.Processing]; ok && !j.Finished.IsZero() {
		out.ProcessingSeconds = j.Finished.Sub(t.Entered).Seconds()
	}
	if j.Chunks != nil {
		out.Chunks = j.Chunks.Total
	}
	return out
}

func traceLease(peer Peer, ev placement.Event, origin time.Time) api.TraceLease {
	l := leaseFor(peer, ev.Lease)
	return api.TraceLease{Kind: api.TraceKindLease, Time: ev.Time.Sub(origin).Seconds(), Event: string(ev.Type), Lease: l.ID,
		GPUIndex: l.GPUIndex, Bytes: l.MemoryBytes, UID: ev.Lease.Holder.UID, Job: l.Labels["wsched.job"]}
}
