package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/wsched/wsched/daemon/api"
)

// ErrLagged means the daemon dropped the stream because the reader fell
// behind; reconnect to continue.
var ErrLagged = fmt.Errorf("event stream dropped: the reader fell behind")

// Events follows GET /v1/events, calling f for each event until ctx ends,
// f returns an error, or the stream ends.
func (c *Client) Events(ctx context.Context, f func(api.Event) error) error {
	return c.stream(ctx, "/v1/events", func(event, data string) error {
		if event == "lagged" {
			return ErrLagged
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		return f(ev)
	})
}

// stream follows the event stream at path, calling f with each event.
func (c *Client) stream(ctx context.Context, path string, f func(event, data string) error) error {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, "http://wsched"+path, nil)
	if err != nil {
		return err
	}
	wait := c.timeout
	if wait <= 0 {
		wait = time.Duration(1<<63 - 1)
	}
	noAnswer := time.AfterFunc(wait, func() {
		cancel(fmt.Errorf("%w at %s within %s: is it stopped (SIGSTOP) or overloaded?", ErrNoAnswer, c.Socket(), c.timeout))
	})
	resp, err := c.hc.Do(req)
	noAnswer.Stop()
	if err != nil {
		if cause := context.Cause(sctx); errors.Is(cause, ErrNoAnswer) {
			return cause
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeError(resp)
	}
	return ReadSSE(resp.Body, f)
}

// ReadSSE parses a Server-Sent Events stream, calling f with each event's
// type ("message" when unnamed) and data (multi-line data joined by \n).
func ReadSSE(r io.Reader, f func(event, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	sc.Split(scanSSELines)
	event, data, has := "", []string{}, false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if has {
				if event == "" {
					event = "message"
				}
				if err := f(event, strings.Join(data, "\n")); err != nil {
					return err
				}
			}
			event, data, has = "", data[:0], false
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event, has = strings.TrimSpace(line[len("event:"):]), true
		case strings.HasPrefix(line, "data:"):
			data, has = append(data, strings.TrimPrefix(line[len("data:"):], " ")), true
		}
	}
	return sc.Err()
}

// scanSSELines splits lines the way the event-stream format defines them:
// ended by CRLF, LF or a lone CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a CR at the end of the buffer: is an LF next?
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
