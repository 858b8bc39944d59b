package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/fdpass"
)

// SubmitJob queues a job for audio already on the daemon's machine.
func (c *Client) SubmitJob(ctx context.Context, req api.JobRequest) (api.Job, error) {
	var out api.Job
	return out, c.do(ctx, http.MethodPost, "/v1/jobs", req, &out)
}

// UploadJob queues a job for a local file, streamed to the daemon.
func (c *Client) UploadJob(ctx context.Context, path string, req api.JobRequest) (api.Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return api.Job{}, fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() { pw.CloseWithError(writeJobForm(mw, f, filepath.Base(path), req)) }()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://wsched/v1/jobs", pr)
	if err != nil {
		return api.Job{}, err
	}
	hreq.Header.Set("Content-Type", mw.FormDataContentType())
	var out api.Job
	return out, c.send(hreq, &out)
}

func writeJobForm(mw *multipart.Writer, f io.Reader, name string, req api.JobRequest) error {
	fields := map[string]string{"model": req.Model, "language": req.Language, "prompt": req.Prompt, "format": req.Format,
		"priority": req.Priority, "translate": strconv.FormatBool(req.Translate)}
	if req.KeepAliveSeconds > 0 {
		fields["keep_alive_seconds"] = strconv.FormatFloat(req.KeepAliveSeconds, 'f', -1, 64)
	}
	vadFormFields(fields, req.VADOptions)
	for k, v := range fields {
		if v != "" {
			if err := mw.WriteField(k, v); err != nil {
				return err
			}
		}
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, f); err != nil {
		return err
	}
	return mw.Close()
}

// Jobs lists the jobs the caller may see, newest first.
func (c *Client) Jobs(ctx context.Context) ([]api.Job, error) {
	var out struct {
		Jobs []api.Job `json:"jobs"`
	}
	return out.Jobs, c.do(ctx, http.MethodGet, "/v1/jobs", nil, &out)
}

// Job returns one job (with its result when finished).
func (c *Client) Job(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	return out, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &out)
}

// CancelJob cancels a queued or running job, or deletes a finished one
// (the answer's Deleted says which): DELETE /v1/jobs/{id}.
func (c *Client) CancelJob(ctx context.Context, id string) (api.Job, error) {
	var out api.Job
	return out, c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(id), nil, &out)
}

// JobEvents follows a job's event stream (every past state, then live
// events) until the job finishes, f fails, or ctx ends. When the daemon
// drops the stream because this reader fell behind, it reconnects (the
// states are replayed).
func (c *Client) JobEvents(ctx context.Context, id string, f func(api.JobEvent) error) error {
	for {
		err := c.jobEventsOnce(ctx, id, f)
		if !errors.Is(err, ErrLagged) {
			return err
		}
	}
}

func (c *Client) jobEventsOnce(ctx context.Context, id string, f func(api.JobEvent) error) error {
	return c.stream(ctx, "/v1/jobs/"+url.PathEscape(id)+"/events", func(event, data string) error {
		switch event {
		case "end":
			return nil
		case "lagged":
			return ErrLagged
		}
		var ev api.JobEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("decode job event: %w", err)
		}
		return f(ev)
	})
}

// vadFormFields adds the set VAD options as form fields.
func vadFormFields(fields map[string]string, o api.VADOptions) {
	if o.VAD != nil {
		fields["vad"] = strconv.FormatBool(*o.VAD)
	}
	fields["vad_model"] = o.VADModel
	for k, v := range map[string]float64{"vad_threshold": o.VADThreshold, "vad_max_speech_s": o.VADMaxSpeechS} {
		if v != 0 {
			fields[k] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	for k, v := range map[string]int{"vad_min_speech_ms": o.VADMinSpeechMS, "vad_min_silence_ms": o.VADMinSilenceMS, "vad_speech_pad_ms": o.VADSpeechPadMS} {
		if v != 0 {
			fields[k] = strconv.Itoa(v)
		}
	}
}

// PassJob queues a job for a local file that the daemon reads through the
// descriptor this process opened (SCM_RIGHTS over the Unix socket): the
// daemon reads exactly the file the caller may read, and nothing is
// copied through the socket. The request has a connection of its own.
func (c *Client) PassJob(ctx context.Context, path string, req api.JobRequest) (api.Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return api.Job{}, fmt.Errorf("open audio: %w", err)
	}
	defer f.Close()
	req.AudioPath = ""
	data, err := json.Marshal(req)
	if err != nil {
		return api.Job{}, fmt.Errorf("encode request: %w", err)
	}
	ctx, cancel := c.bounded(ctx, 0)
	defer cancel()
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, err := c.dial(ctx)
		if err != nil {
			return nil, err
		}
		return fdpass.NewSender(conn.(*net.UnixConn), f), nil
	}}
	defer tr.CloseIdleConnections()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://wsched/v1/jobs", bytes.NewReader(data))
	if err != nil {
		return api.Job{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set(api.AudioFDHeader, filepath.Base(path))
	var out api.Job
	return out, c.sendVia(&http.Client{Transport: tr}, hreq, &out)
}
