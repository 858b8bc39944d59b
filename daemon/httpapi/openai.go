package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/jobs/transcript"
	"github.com/wsched/wsched/models"
)

// openAIError is OpenAI's error body, which its client libraries parse.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeOpenAIError(w http.ResponseWriter, err error) {
	status, typ, code := http.StatusInternalServerError, "server_error", "internal"
	var he *httpError
	if errors.As(err, &he) {
		status, code = he.status, he.code
		if status < 500 {
			typ = "invalid_request_error"
		}
	}
	var body openAIError
	body.Error.Message, body.Error.Type, body.Error.Code = err.Error(), typ, &code
	writeJSON(w, status, body)
}

// openAITranscription serves POST /v1/audio/transcriptions and
// /v1/audio/translations: multipart file, model, language, prompt,
// response_format, temperature, timestamp_granularities[] and wsched's VAD
// fields (vad, vad_model, vad_threshold, …: vadFromForm); synchronous,
// through the same job machinery as /v1/jobs.
func (s *Server) openAITranscription(translate bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		peer := peerFrom(r.Context())
		if err := s.admitJobs(r.Context(), peer); err != nil {
			writeOpenAIError(w, err)
			return
		}
		form, path, err := s.readUpload(w, r)
		if err == nil && path == "" {
			err = badRequest("invalid_request", "a file part named \"file\" is required")
		}
		var req api.JobRequest
		if err == nil {
			req, err = openAIRequest(form, translate)
		}
		var spec jobs.Spec
		if err == nil {
			spec, err = s.jobSpec(peer, req, path)
		}
		var j jobs.Job
		if err == nil {
			j, err = s.jobs.Submit(r.Context(), spec)
			err = jobErrorOrNil(err)
		}
		if err != nil {
			s.removeFile(path)
			writeOpenAIError(w, err)
			return
		}
		s.answerOpenAI(w, r, j, spec.Format, translate)
	}
}

func jobErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return jobError(err)
}

func openAIRequest(form map[string]string, translate bool) (api.JobRequest, error) {
	req := api.JobRequest{Model: form["model"], Language: form["language"], Prompt: form["prompt"], Format: form["response_format"], Translate: translate}
	if v := form["temperature"]; v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || !(t >= 0 && t <= 1) { // NaN fails both comparisons
			return req, badRequest("invalid_field", "field temperature: %q is not allowed: want a number from 0 to 1", v)
		}
		req.Temperature = t
	}
	var err error
	if req.VADOptions, err = vadFromForm(form); err != nil {
		return req, err
	}
	for _, g := range strings.Split(form["timestamp_granularities[]"], ",") {
		switch strings.TrimSpace(g) {
		case "", "segment":
		case "word":
			return req, badRequest("invalid_field", "field timestamp_granularities[]: word timestamps are not supported; use segment")
		default:
			return req, badRequest("invalid_field", "field timestamp_granularities[]: %q is not allowed: want segment", g)
		}
	}
	return req, nil
}

// answerOpenAI waits for the job and answers in the requested format. A
// client that hangs up cancels its job.
func (s *Server) answerOpenAI(w http.ResponseWriter, r *http.Request, j jobs.Job, format string, translate bool) {
	done, err := s.jobs.Wait(r.Context(), j.ID)
	if r.Context().Err() != nil { // the client hung up, or the daemon is stopping
		_, _ = s.jobs.Cancel(context.Background(), j.ID)
		writeOpenAIError(w, &httpError{status: http.StatusServiceUnavailable, code: "shutting_down",
			err: fmt.Errorf("job %s was cancelled: the request ended before it finished", j.ID)})
		return
	}
	if err != nil {
		writeOpenAIError(w, jobError(err))
		return
	}
	if done.State != jobs.Completed || done.Result == nil {
		status, code := http.StatusInternalServerError, "transcription_failed"
		if done.ErrorKind == "bad_input" {
			status, code = http.StatusBadRequest, "invalid_input"
		}
		writeOpenAIError(w, &httpError{status: status, code: code, err: fmt.Errorf("job %s %s: %s", done.ID, done.State, done.Error)})
		return
	}
	t := *done.Result
	if translate {
		t.Task = "translate"
	}
	ct, body, err := transcript.Render(format, t)
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// openAIModel is one entry of GET /v1/models.
type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	data := []openAIModel{}
	for _, m := range s.modelNames() {
		data = append(data, openAIModel{ID: m.name, Object: "model", Created: m.created, OwnedBy: "wsched"})
	}
	data = append(data, openAIModel{ID: "whisper-1", Object: "model", Created: s.info.Started.Unix(), OwnedBy: "wsched"})
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

type modelName struct {
	name    string
	created int64
}

// modelNames lists the served models (a fresh registry scan) for
// GET /v1/models; created is the model file's modification time.
func (s *Server) modelNames() []modelName {
	reg, err := s.registry(context.Background())
	if err != nil {
		s.log.Warn("model registry", "err", err)
		return nil
	}
	var out []modelName
	for _, m := range reg.Models() {
		if !m.Available() {
			continue
		}
		created := s.info.Started.Unix()
		if st, err := os.Stat(m.Path); err == nil {
			created = st.ModTime().Unix()
		}
		out = append(out, modelName{name: m.Name, created: created})
	}
	return out
}

// registry is a fresh scan of the models, with the backends the host
// discovered.
func (s *Server) registry(ctx context.Context) (*models.Registry, error) {
	set, err := s.backends.Descriptors(ctx)
	if err != nil {
		return nil, err
	}
	return models.Load(ctx, s.cfg.Models, set)
}
