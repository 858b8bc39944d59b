package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
	"github.com/wsched/wsched/daemon/procwatch"
	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/placement"
)

// seconds converts an API seconds field, rejecting negative and absurd values.
func seconds(field string, v float64) (time.Duration, error) {
	if v < 0 || math.IsNaN(v) || v > 10*365*24*3600 {
		return 0, badRequest("invalid_field", "field %s: %v is not allowed: want seconds from 0", field, v)
	}
	return time.Duration(v * float64(time.Second)), nil
}

// leaseRequest turns an API request into an engine request: memory (given
// or estimated), device, priority, times and the holder.
func (s *Server) leaseRequest(ctx context.Context, peer Peer, body api.LeaseRequest) (placement.Request, any, error) {
	var req placement.Request
	var err error
	if req.Device, err = device.Parse(body.Device); err != nil {
		return req, nil, badRequest("invalid_field", "field device: %v", err)
	}
	if req.Priority, err = placement.ParsePriority(body.Priority); err != nil {
		return req, nil, badRequest("invalid_field", "field priority: %q is not allowed: want high, normal or low", body.Priority)
	}
	if req.TTL, err = seconds("ttl_seconds", body.TTLSeconds); err != nil {
		return req, nil, err
	}
	if req.Wait, err = seconds("wait_seconds", body.WaitSeconds); err != nil {
		return req, nil, err
	}
	if req.Holder, err = s.resolveHolder(peer, body.Holder); err != nil {
		return req, nil, err
	}
	if err := checkLabels(body.Labels); err != nil {
		return req, nil, err
	}
	req.Labels = body.Labels
	if body.IdempotencyKey != "" {
		if err := checkIdempotencyKey(body.IdempotencyKey); err != nil {
			return req, nil, err
		}
		req.Labels = maps.Clone(body.Labels)
		if req.Labels == nil {
			req.Labels = map[string]string{}
		}
		req.Labels[api.IdempotencyLabel] = body.IdempotencyKey
	}
	var est any
	req.Bytes, est, req.EstimateKey, err = s.leaseSize(ctx, body, req.Device)
	return req, est, err
}

// leaseSize is how much memory a lease request asks for: memory_bytes, the
// size of its model, or [leases] default_memory (none for the CPU).
func (s *Server) leaseSize(ctx context.Context, body api.LeaseRequest, dev device.Spec) (int64, any, *estimator.Key, error) {
	switch {
	case body.MemoryBytes < 0:
		return 0, nil, nil, badRequest("invalid_field", "field memory_bytes: %d is not allowed: want bytes above 0", body.MemoryBytes)
	case body.MemoryBytes > 0 && body.Model != "":
		return 0, nil, nil, badRequest("invalid_request", "give memory_bytes or model, not both")
	case body.MemoryBytes > 0:
		return body.MemoryBytes, nil, nil, nil
	case body.Model != "":
		return s.modelSize(ctx, body)
	case dev.Kind != device.CPU:
		return int64(s.cfg.Leases.DefaultMemory), nil, nil, nil // neither given: [leases] default_memory
	}
	return 0, nil, nil, nil
}

// estimateForLease sizes a `model` lease request by name with the
// estimator (which learns from measured peaks of earlier leases with the
// same key).
func (s *Server) estimateForLease(body api.LeaseRequest) (estimator.Result, error) {
	return s.est.EstimateAnyGPU(estimator.Request{
		Backend: estimator.Backend(body.Backend), Model: body.Model, Precision: body.Precision,
		Beam: body.Beam, Batch: body.BatchSize, SegmentSeconds: body.SegmentSeconds,
	})
}

// resolveHolder decides whose lease it is: the connecting process, or a PID
// the request names that belongs to the same user (root may name any).
func (s *Server) resolveHolder(peer Peer, h *api.HolderRequest) (placement.Holder, error) {
	if !peer.Known {
		return placement.Holder{}, forbidden("leases need the Unix socket: the peer's identity is unknown")
	}
	pid := peer.PID
	if h != nil && h.PID != 0 {
		pid = h.PID
	}
	if pid != peer.PID { // SO_PEERCRED names the process (thread group), never a thread
		var err error
		if pid, err = s.processOf(pid, "holder.pid"); err != nil {
			return placement.Holder{}, err
		}
	}
	info, err := s.watch.Lookup(s.procRoot, pid)
	if err != nil {
		return placement.Holder{}, badRequest("invalid_field", "field holder.pid: %v", err)
	}
	if pid != peer.PID && !peer.IsRoot() && info.UID != peer.UID {
		return placement.Holder{}, forbidden("holder pid %d belongs to uid %d, not to uid %d", pid, info.UID, peer.UID)
	}
	name := info.Name
	if h != nil && h.Name != "" {
		name = h.Name
	}
	return placement.Holder{PID: pid, UID: info.UID, Name: name, StartTicks: info.StartTicks}, nil
}

// authorize allows the holder's user and root to change a lease.
func authorize(peer Peer, l placement.Lease) error {
	if peer.IsRoot() || (peer.Known && peer.UID == l.Holder.UID) {
		return nil
	}
	return forbidden("lease %s belongs to uid %d; only that user or root may change it", l.ID, l.Holder.UID)
}

func (s *Server) postLease(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	var body api.LeaseRequest
	if err := decodeLeaseRequest(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	req, est, err := s.leaseRequest(r.Context(), peer, body)
	if err != nil {
		writeError(w, err)
		return
	}
	if body.IdempotencyKey != "" {
		l, leave, err := s.sameKey(r.Context(), req.Holder.UID, body.IdempotencyKey)
		switch {
		case err != nil:
			writeError(w, err)
			return
		case leave == nil: // a retry: the lease granted for the key before
			s.log.Info("lease request retried with its idempotency key: answered with its lease", "lease", l.ID, "peer_uid", peer.UID)
			writeJSON(w, http.StatusOK, convert.FromLease(l))
			return
		}
		defer leave()
	}
	if err := s.admitLease(peer, &req); err != nil {
		s.log.Info("lease refused", "peer_pid", peer.PID, "peer_uid", peer.UID, "bytes", req.Bytes, "err", err)
		writeError(w, err)
		return
	}
	l, err := s.eng.Acquire(r.Context(), req)
	if err != nil {
		s.log.Debug("lease refused", "peer_pid", peer.PID, "peer_uid", peer.UID, "bytes", req.Bytes, "device", req.Device, "err", err)
		writeError(w, err)
		return
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) { // its arguments cost allocations on every grant
		s.log.Debug("lease granted", "lease", l.ID, "gpu", l.GPUIndex, "bytes", l.Bytes, "holder", l.Holder.PID, "peer_pid", peer.PID, "peer_uid", peer.UID)
	}
	if body.IdempotencyKey != "" {
		s.keys.remember(l.Holder.UID, body.IdempotencyKey, l.ID)
	}
	out := convert.FromLease(l)
	out.Estimate = est
	s.withEnforcement(&out, l)
	writeJSON(w, http.StatusCreated, out)
}

// decodeLeaseRequest decodes POST /v1/leases; an explicit
// "memory_bytes": 0 is refused rather than read as "not given".
func decodeLeaseRequest(w http.ResponseWriter, r *http.Request, body *api.LeaseRequest) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBodyBytes))
	if err != nil {
		return jsonError(err)
	}
	if err := DecodeJSON(bytes.NewReader(raw), body, false); err != nil {
		return err
	}
	if body.MemoryBytes != 0 {
		return nil
	}
	var given struct { // 0: left out, or given as 0?
		MemoryBytes *int64 `json:"memory_bytes"`
	}
	if json.Unmarshal(raw, &given) == nil && given.MemoryBytes != nil && *given.MemoryBytes == 0 {
		return badRequest("invalid_field", "field memory_bytes: 0 is not allowed: want bytes above 0, or leave it out for [leases] default_memory")
	}
	return nil
}

// leaseFor is a lease as peer may see it: the labels of other users'
// leases are hidden, except from root.
func leaseFor(peer Peer, l placement.Lease) api.Lease {
	out := convert.FromLease(l)
	if !peer.IsRoot() && (!peer.Known || peer.UID != l.Holder.UID) {
		out.Labels = nil
	}
	return out
}

func (s *Server) listLeases(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	v := s.eng.View()
	out := []api.Lease{}
	for _, g := range v.GPUs {
		for _, l := range g.Leases {
			out = append(out, leaseFor(peer, l))
		}
	}
	for _, l := range append(v.CPU, v.Queue...) {
		out = append(out, leaseFor(peer, l))
	}
	writeJSON(w, http.StatusOK, map[string]any{"leases": out})
}

func (s *Server) getLease(w http.ResponseWriter, r *http.Request) {
	l, err := s.eng.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseFor(peerFrom(r.Context()), l))
}

// changeLease applies f to the lease the path names, as the peer: f passes
// the guard to the engine, which checks in the same step that the peer may
// change the lease (one trip through the owner loop).
func (s *Server) changeLease(w http.ResponseWriter, r *http.Request, what string, f func(ctx context.Context, id string, may placement.Guard) (placement.Lease, error)) {
	peer := peerFrom(r.Context())
	l, err := f(r.Context(), r.PathValue("id"), func(l placement.Lease) error { return authorize(peer, l) })
	if err != nil {
		s.log.Debug("lease "+what+" refused", "lease", r.PathValue("id"), "peer_pid", peer.PID, "peer_uid", peer.UID, "err", err)
		writeError(w, err)
		return
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("lease "+what, "lease", l.ID, "peer_pid", peer.PID, "peer_uid", peer.UID)
	}
	writeJSON(w, http.StatusOK, convert.FromLease(l))
}

func (s *Server) renewLease(w http.ResponseWriter, r *http.Request) {
	var body api.RenewRequest
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	ttl, err := seconds("ttl_seconds", body.TTLSeconds)
	if err != nil {
		writeError(w, err)
		return
	}
	s.changeLease(w, r, "renewed", func(ctx context.Context, id string, may placement.Guard) (placement.Lease, error) {
		return s.eng.RenewAs(ctx, id, ttl, may)
	})
}

func (s *Server) deleteLease(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	s.changeLease(w, r, "released", func(ctx context.Context, id string, may placement.Guard) (placement.Lease, error) {
		return s.eng.ReleaseAs(ctx, id, fmt.Sprintf("released by uid %d (pid %d)", peer.UID, peer.PID), may)
	})
}

// processOf resolves a PID a request names to its thread group: a thread ID
// stands for the process it belongs to, which is what is stored and watched
// (a thread's exit is not its process's, and NVML lists processes).
func (s *Server) processOf(pid int, field string) (int, error) {
	if s.watch.Leader(pid) {
		return pid, nil // its pidfd is open: a process, known without reading /proc
	}
	tgid, err := procwatch.ThreadGroup(s.procRoot, pid)
	if err != nil {
		return 0, badRequest("invalid_field", "field %s: %v", field, err)
	}
	if tgid != pid {
		s.log.Info("thread ID resolved to its process", "field", field, "tid", pid, "pid", tgid)
	}
	return tgid, nil
}

func (s *Server) addLeasePID(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	var body api.PIDRequest
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	pid, err := s.processOf(body.PID, "pid")
	if err != nil {
		writeError(w, err)
		return
	}
	body.PID = pid
	info, err := s.watch.Lookup(s.procRoot, body.PID)
	if err != nil {
		writeError(w, badRequest("invalid_field", "field pid: %v", err))
		return
	}
	if !peer.IsRoot() && info.UID != peer.UID {
		writeError(w, forbidden("pid %d belongs to uid %d, not to uid %d", body.PID, info.UID, peer.UID))
		return
	}
	s.changeLease(w, r, "pid added", func(ctx context.Context, id string, may placement.Guard) (placement.Lease, error) {
		l, err := s.eng.AddProcessAs(ctx, id, body.PID, info.StartTicks, may)
		if err == nil {
			err = s.watch.Watch(body.PID)
		}
		if err == nil && s.onPID != nil {
			s.onPID(l, body.PID)
		}
		return l, err
	})
}
