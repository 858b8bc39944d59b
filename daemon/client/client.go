// Package client talks to the wsched daemon over its Unix socket: leases,
// GPU views, status and the event stream, with the daemon's errors turned
// back into Go errors.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// ErrUnreachable means no daemon answers on the socket.
var ErrUnreachable = errors.New("wsched daemon unreachable")

// APIError is an error answer of the daemon.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return e.Message }

// IsCode reports whether err is an APIError with the given code.
func IsCode(err error, code string) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// ErrNoAnswer means the daemon accepted the connection but did not answer
// in time (stopped, or overloaded).
var ErrNoAnswer = errors.New("wsched daemon did not answer")

// Timeouts of a Client: connecting, and an answer to a request that does
// not wait by design (a lease request waits up to its wait_seconds more).
const (
	DialTimeout    = 5 * time.Second
	RequestTimeout = 30 * time.Second
)

// Client is a connection pool to one daemon socket.
type Client struct {
	socket    string
	discovery *discovery // nil: socket is the one to use
	hc        *http.Client
	timeout   time.Duration
}

// New returns a client for the daemon listening on socket.
func New(socket string) *Client {
	c := &Client{socket: socket, timeout: RequestTimeout}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.dial(ctx)
		},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	c.hc = &http.Client{Transport: tr}
	return c
}

// SetTimeout changes RequestTimeout for this client (tests).
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// bounded gives ctx the client's timeout plus extra, unless it has a
// deadline already.
func (c *Client) bounded(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, c.timeout+extra, noAnswer{socket: c.Socket(), after: c.timeout + extra})
}

// noAnswer is the cause of a request that ran out of the client's timeout;
// its message is only formatted when it is shown.
type noAnswer struct {
	socket string
	after  time.Duration
}

func (e noAnswer) Error() string {
	return fmt.Sprintf("%v at %s within %s: is it stopped (SIGSTOP) or overloaded? see `systemctl status wsched`", ErrNoAnswer, e.socket, e.after)
}

func (e noAnswer) Unwrap() error { return ErrNoAnswer }

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) unreachable(err error) error {
	var de *discoveryError
	if errors.As(err, &de) {
		return c.unreachableAll(de)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w at %s: permission denied: join group wsched (`sudo usermod -aG wsched $USER`, then log in again) or ask its administrator", ErrUnreachable, c.socket)
	}
	return fmt.Errorf("%w at %s (%v): start it with `systemctl start wsched` or `wsched serve`", ErrUnreachable, c.socket, err)
}

// do sends a request with an optional JSON body and decodes the answer
// into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doWaiting(ctx, 0, method, path, in, out)
}

// doWaiting is do for a request the daemon may hold up to wait by design.
func (c *Client) doWaiting(ctx context.Context, wait time.Duration, method, path string, in, out any) error {
	ctx, cancel := c.bounded(ctx, wait)
	defer cancel()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://wsched"+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, out)
}

// send sends a prepared request and decodes the answer into out.
func (c *Client) send(req *http.Request, out any) error { return c.sendVia(c.hc, req, out) }

// sendVia is send over hc.
func (c *Client) sendVia(hc *http.Client, req *http.Request, out any) error {
	method, path := req.Method, req.URL.Path
	resp, err := hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && !errors.Is(err, context.DeadlineExceeded) {
			return c.unreachable(op.Err)
		}
		if cause := context.Cause(req.Context()); errors.Is(cause, ErrNoAnswer) {
			return cause
		}
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if c, ok := out.(copyTo); ok {
		if _, err := io.Copy(c.w, resp.Body); err != nil {
			return fmt.Errorf("read %s %s answer: %w", method, path, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

func decodeError(resp *http.Response) error {
	var eb api.ErrorBody
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Code == "" {
		return &APIError{Status: resp.StatusCode, Code: "http_" + fmt.Sprint(resp.StatusCode), Message: fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(data))}
	}
	return &APIError{Status: resp.StatusCode, Code: eb.Error.Code, Message: eb.Error.Message}
}

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// GPUs returns GET /v1/gpus.
func (c *Client) GPUs(ctx context.Context) (api.GPUs, error) {
	var out api.GPUs
	return out, c.do(ctx, http.MethodGet, "/v1/gpus", nil, &out)
}

// Status returns GET /v1/status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var out api.Status
	return out, c.do(ctx, http.MethodGet, "/v1/status", nil, &out)
}

// Acquire asks for a lease; with WaitSeconds it may block that long.
func (c *Client) Acquire(ctx context.Context, req api.LeaseRequest) (api.Lease, error) {
	var out api.Lease
	wait := time.Duration(req.WaitSeconds * float64(time.Second))
	return out, c.doWaiting(ctx, wait, http.MethodPost, "/v1/leases", req, &out)
}

// Leases lists granted leases and queued requests.
func (c *Client) Leases(ctx context.Context) ([]api.Lease, error) {
	var out struct {
		Leases []api.Lease `json:"leases"`
	}
	return out.Leases, c.do(ctx, http.MethodGet, "/v1/leases", nil, &out)
}

// Lease returns one lease or request, also recently ended ones.
func (c *Client) Lease(ctx context.Context, id string) (api.Lease, error) {
	var out api.Lease
	return out, c.do(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id), nil, &out)
}

// Renew extends a lease by ttl (0: its own TTL).
func (c *Client) Renew(ctx context.Context, id string, ttl time.Duration) (api.Lease, error) {
	var out api.Lease
	return out, c.do(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/renew", api.RenewRequest{TTLSeconds: ttl.Seconds()}, &out)
}

// Release ends a lease (or cancels a queued request).
func (c *Client) Release(ctx context.Context, id string) (api.Lease, error) {
	var out api.Lease
	return out, c.do(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), nil, &out)
}

// AddPID counts another process's GPU memory against a lease.
func (c *Client) AddPID(ctx context.Context, id string, pid int) (api.Lease, error) {
	var out api.Lease
	return out, c.do(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/pids", api.PIDRequest{PID: pid}, &out)
}

// Estimate asks the daemon's estimator (which knows the GPUs and what it
// has learned).
func (c *Client) Estimate(ctx context.Context, req api.EstimateRequest) (api.Estimate, error) {
	var out api.Estimate
	return out, c.do(ctx, http.MethodPost, "/v1/estimate", req, &out)
}

// Samples returns what the daemon has measured and learned for an estimate
// key or a CUDA context key (wsched estimate shows it).
func (c *Client) Samples(ctx context.Context, req api.SamplesRequest) ([]int64, error) {
	var out api.Samples
	return out.Samples, c.do(ctx, http.MethodPost, "/v1/estimator/samples", req, &out)
}
