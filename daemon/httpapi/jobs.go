package httpapi

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/placement"
)

// jobStatus maps the job manager's errors to HTTP.
var jobStatus = []errorStatus{
	{jobs.ErrNotFound, http.StatusNotFound, "not_found"},
	{jobs.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{jobs.ErrFinished, http.StatusConflict, "job_finished"},
	{jobs.ErrQueueFull, http.StatusServiceUnavailable, "too_many_jobs"},
	{jobs.ErrLimit, http.StatusTooManyRequests, "limit_exceeded"},
	{jobs.ErrStopped, http.StatusServiceUnavailable, "shutting_down"},
}

// jobError maps the job manager's errors to API errors.
func jobError(err error) error {
	if he := classify(err, jobStatus); he != nil {
		return he
	}
	return err
}

// owner identifies who submits and may see a job: the socket peer, or the
// bearer of the TCP token (uid −1).
func owner(p Peer) placement.Holder {
	if !p.Known {
		return placement.Holder{PID: 0, UID: jobs.TokenUID, Name: "token"}
	}
	return placement.Holder{PID: p.PID, UID: p.UID}
}

// mayAccess allows a job's owner and root.
func mayAccess(p Peer, j jobs.Job) error {
	if p.IsRoot() || owner(p).UID == j.Spec.Owner.UID {
		return nil
	}
	return forbidden("job %s belongs to another user", j.ID)
}

// jobSpec validates a request into a job spec. The audio is either an
// upload the daemon already saved (uploaded) or a path the client may read.
func (s *Server) jobSpec(peer Peer, req api.JobRequest, uploaded string) (jobs.Spec, error) {
	if uploaded != "" && req.AudioPath != "" {
		return jobs.Spec{}, badRequest("invalid_request", "audio_path and a passed or uploaded file: send one")
	}
	spec := jobs.Spec{
		Model: req.Model, Language: strings.ToLower(strings.TrimSpace(req.Language)), Translate: req.Translate,
		Prompt: req.Prompt, Temperature: req.Temperature, Owner: owner(peer),
	}
	var err error
	if spec.VADOptions, err = jobVAD(req.VADOptions); err != nil {
		return spec, err
	}
	if spec.Model == "" || spec.Model == "whisper-1" {
		spec.Model = s.cfg.Models.Default
	}
	if spec.Language == "auto" {
		spec.Language = ""
	}
	if spec.Language != "" && !transcript.IsLanguage(spec.Language) {
		return spec, badRequest("invalid_field", "field language: %q is not a Whisper language code (e.g. en, de, zh)", req.Language)
	}
	if spec.Format, err = transcript.ParseFormat(req.Format); err != nil {
		return spec, badRequest("invalid_field", "field format: %v", err)
	}
	if spec.Priority, err = placement.ParsePriority(req.Priority); err != nil {
		return spec, badRequest("invalid_field", "field priority: %q is not allowed: want high, normal or low", req.Priority)
	}
	if spec.Priority >= placement.High {
		if err := s.mayUseHigh(peer); err != nil {
			return spec, err
		}
	}
	ka, err := seconds("keep_alive_seconds", req.KeepAliveSeconds)
	if err != nil {
		return spec, err
	}
	if limit := s.cfg.Backends.MaxKeepAlive.D(); ka > limit {
		return spec, badRequest("invalid_field", "field keep_alive_seconds: %v is more than [backends] max_keep_alive (%s)", req.KeepAliveSeconds, limit)
	}
	spec.KeepAlive = ka
	switch {
	case uploaded != "":
		spec.AudioPath, spec.Uploaded = uploaded, true
	case req.AudioPath == "":
		return spec, badRequest("invalid_request", "audio_path or an uploaded file is required")
	case !peer.Known:
		return spec, forbidden("audio by path needs the Unix socket; upload the file over TCP")
	default:
		copied, err := s.snapshotAudio(peer, req.AudioPath)
		if err != nil {
			var he *httpError
			if errors.As(err, &he) {
				return spec, err
			}
			return spec, forbidden("audio_path: %v", err)
		}
		spec.AudioPath, spec.Uploaded = copied, true
	}
	return spec, nil
}

func (s *Server) postJob(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	if err := s.admitJobs(r.Context(), peer); err != nil {
		writeError(w, err)
		return
	}
	req, uploaded, err := s.readJobRequest(w, r)
	if err == nil && r.Header.Get(api.AudioFDHeader) != "" {
		if uploaded != "" {
			err = badRequest("invalid_request", "%s with an uploaded file: send one", api.AudioFDHeader)
		} else {
			uploaded, err = s.snapshotPassed(r, peer)
		}
	}
	if err == nil {
		var spec jobs.Spec
		if spec, err = s.jobSpec(peer, req, uploaded); err == nil {
			var j jobs.Job
			if j, err = s.jobs.Submit(r.Context(), spec); err == nil {
				writeJSON(w, http.StatusAccepted, j)
				return
			}
			err = jobError(err)
		}
	}
	s.removeFile(uploaded)
	writeError(w, err)
}

// admitJobs answers a submission that would be refused before its audio is
// read: the job table's size ([jobs] max_jobs) and the owner's [limits]
// (active_jobs and stored_jobs per uid, token_… for the TCP token), counted
// by the job manager, which Submit checks again atomically.
func (s *Server) admitJobs(ctx context.Context, p Peer) error {
	return jobErrorOrNil(s.jobs.Admit(ctx, owner(p).UID))
}

// readJobRequest takes the JSON body, or a multipart form whose "file" part
// is saved as an upload.
func (s *Server) readJobRequest(w http.ResponseWriter, r *http.Request) (api.JobRequest, string, error) {
	var req api.JobRequest
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		return req, "", decodeBody(w, r, &req, false)
	}
	form, path, err := s.readUpload(w, r)
	if err != nil {
		return req, "", err
	}
	req = api.JobRequest{Model: form["model"], Language: form["language"], Prompt: form["prompt"], Format: form["format"],
		Priority: form["priority"], Translate: form["translate"] == "true"}
	if v := form["keep_alive_seconds"]; v != "" {
		if _, err := fmt.Sscan(v, &req.KeepAliveSeconds); err != nil {
			s.removeFile(path)
			return req, "", badRequest("invalid_field", "field keep_alive_seconds: %q is not a number", v)
		}
	}
	if req.VADOptions, err = vadFromForm(form); err != nil {
		s.removeFile(path)
		return req, "", err
	}
	return req, path, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	peer := peerFrom(r.Context())
	all, err := s.jobs.List(r.Context())
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	out := []jobs.Job{}
	for _, j := range all {
		if mayAccess(peer, j) == nil {
			out = append(out, j)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out})
}

// accessibleJob loads a job and checks the peer may see it.
func (s *Server) accessibleJob(r *http.Request) (jobs.Job, error) {
	j, err := s.jobs.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return j, jobError(err)
	}
	return j, mayAccess(peerFrom(r.Context()), j)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.accessibleJob(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// deleteJob serves DELETE /v1/jobs/{id}: a queued or running job is
// cancelled (it stays, state cancelled, until [jobs] result_ttl); a
// finished one (completed, failed or cancelled) is deleted with its result.
// The answer is the job, with "deleted" saying which happened.
func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request) {
	if _, err := s.accessibleJob(r); err != nil {
		writeError(w, err)
		return
	}
	j, deleted, err := s.jobs.Delete(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	if !j.State.Finished() { // a running job: wait (briefly) for its backend call to stop
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		if done, err := s.jobs.Wait(ctx, j.ID); err == nil {
			j = done
		}
		cancel()
	}
	peer := peerFrom(r.Context())
	if deleted {
		s.log.Info("job deleted", "job", j.ID, "state", j.State, "peer_pid", peer.PID, "peer_uid", peer.UID)
	} else {
		s.log.Info("job cancel requested", "job", j.ID, "peer_pid", peer.PID, "peer_uid", peer.UID)
	}
	writeJSON(w, http.StatusOK, struct {
		jobs.Job
		Deleted bool `json:"deleted"`
	}{j, deleted})
}

// jobEvents streams a job's events as Server-Sent Events: every state it
// has been in, then live state changes, progress and segments, ending when
// the job finishes.
func (s *Server) jobEvents(w http.ResponseWriter, r *http.Request) {
	if _, err := s.accessibleJob(r); err != nil {
		writeError(w, err)
		return
	}
	_, ch, stop, err := s.jobs.Subscribe(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, jobError(err))
		return
	}
	defer stop()
	// The stream ends with "end" when the job finished, "lagged" when this
	// reader fell behind (reconnect: the states are replayed).
	closing := func() string {
		if j, err := s.jobs.Get(context.Background(), r.PathValue("id")); err == nil && !j.State.Finished() {
			return "lagged"
		}
		return "end"
	}
	streamSSE(w, r, ch, closing, func(ev jobs.Event) (string, any) { return string(ev.Type), ev })
}
