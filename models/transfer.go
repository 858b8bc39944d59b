package models

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// fetch runs one attempt: it asks for the bytes after what the partial
// file holds and appends them. It returns nil when the file is complete.
func (p *puller) fetch(ctx context.Context, f *os.File) error {
	offset, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	restarted := false
	restart := func(why string) error {
		if restarted {
			return fmt.Errorf("pull %s: GET %s: %s after a restart: %w", p.entry.Name, p.url, why, ErrTransfer)
		}
		p.log.Warn("restarting model download from 0", "model", p.entry.Name, "reason", why, "discarded_bytes", offset)
		restarted, offset = true, 0
		p.res.ResumedBytes = 0
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("pull %s: truncate partial file: %w", p.entry.Name, err)
		}
		return nil
	}
	for {
		resp, err := p.get(ctx, offset)
		if err != nil {
			return err
		}
		switch code := resp.StatusCode; {
		case code == http.StatusPartialContent && offset > 0:
			start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
			if !ok || start != offset {
				resp.Body.Close()
				if err := restart(fmt.Sprintf("Content-Range %q does not continue at byte %d", resp.Header.Get("Content-Range"), offset)); err != nil {
					return err
				}
				continue
			}
			return p.copy(ctx, f, resp.Body, offset, total)
		case code == http.StatusOK || code == http.StatusPartialContent:
			if offset > 0 {
				if err := restart("the server ignored the Range request"); err != nil {
					resp.Body.Close()
					return err
				}
			}
			return p.copy(ctx, f, resp.Body, 0, resp.ContentLength)
		case code == http.StatusRequestedRangeNotSatisfiable:
			total, ok := parseUnsatisfiedRange(resp.Header.Get("Content-Range"))
			resp.Body.Close()
			if ok && total == offset {
				return nil // the partial file is already complete
			}
			if err := restart(fmt.Sprintf("416 for a partial file of %d bytes (Content-Range %q)", offset, resp.Header.Get("Content-Range"))); err != nil {
				return err
			}
		default:
			resp.Body.Close()
			sentinel := ErrHTTP
			if code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout {
				sentinel = ErrTransfer
			}
			return fmt.Errorf("pull %s: GET %s: %s: %w", p.entry.Name, p.url, resp.Status, sentinel)
		}
	}
}

// get sends the request, with a Range header when resuming.
func (p *puller) get(ctx context.Context, offset int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	client := p.opts.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pull %s: %w", p.entry.Name, ctx.Err())
		}
		return nil, fmt.Errorf("pull %s: %w: %w", p.entry.Name, err, ErrTransfer)
	}
	return resp, nil
}

// copy appends body to f at offset; total is the complete file's size
// (-1 when unknown).
func (p *puller) copy(ctx context.Context, f *os.File, body io.ReadCloser, offset, total int64) error {
	defer body.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	if total >= 0 && offset > 0 && total < offset {
		total = -1
	}
	done := offset
	p.report(Progress{Bytes: done, TotalBytes: total, ResumedBytes: offset})
	buf := make([]byte, 256<<10)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return fmt.Errorf("pull %s: write partial file: %w", p.entry.Name, err)
			}
			done += int64(n)
			p.res.DownloadedBytes += int64(n)
			p.report(Progress{Bytes: done, TotalBytes: total, ResumedBytes: offset})
		}
		switch {
		case errors.Is(rerr, io.EOF):
			if total >= 0 && done != total {
				return fmt.Errorf("pull %s: GET %s: body ended at byte %d of %d: %w", p.entry.Name, p.url, done, total, ErrTransfer)
			}
			return nil
		case rerr != nil && ctx.Err() != nil:
			return fmt.Errorf("pull %s: stopped at byte %d, partial file kept: %w", p.entry.Name, done, ctx.Err())
		case rerr != nil:
			return fmt.Errorf("pull %s: GET %s: at byte %d: %w: %w", p.entry.Name, p.url, done, rerr, ErrTransfer)
		}
	}
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*").
func parseContentRange(s string) (start, total int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return 0, 0, false
	}
	rng, size, found := strings.Cut(spec, "/")
	if !found {
		return 0, 0, false
	}
	first, last, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	end, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, false
	}
	if size == "*" {
		return start, -1, true
	}
	total, err := strconv.ParseInt(size, 10, 64)
	if err != nil || total <= end {
		return 0, 0, false
	}
	return start, total, true
}

// parseUnsatisfiedRange reads a 416's "bytes */TOTAL".
func parseUnsatisfiedRange(s string) (int64, bool) {
	size, found := strings.CutPrefix(strings.TrimSpace(s), "bytes */")
	if !found {
		return 0, false
	}
	total, err := strconv.ParseInt(size, 10, 64)
	return total, err == nil && total >= 0
}
