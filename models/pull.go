package models

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsched/wsched/internal/config"
)

// PartialSuffix is appended to a model's file name while it downloads:
// ggml-NAME.bin.partial. The registry does not serve partial files.
const PartialSuffix = ".partial"

// PullOptions configures Pull.
type PullOptions struct {
	// Dir is the directory the model is saved in ([models] dir).
	Dir string
	// BaseURL is where BaseURL/ggml-NAME.bin is fetched from; "" means
	// config.DefaultModelsURL. With the default, a catalog entry's own
	// BaseURL (the tinydiarize model's) applies.
	BaseURL string
	// Catalog lists the models that may be pulled and their checksums;
	// nil means DefaultCatalog().
	Catalog Catalog
	// SHA1 is the expected checksum (hex), overriding the catalog's; a way
	// to verify a model whisper.cpp publishes no checksum for.
	SHA1 string
	// Client makes the requests; nil means http.DefaultClient.
	Client *http.Client
	// Progress, when set, is called from Pull's goroutine after each chunk
	// written and while verifying. Bytes never decreases within an attempt;
	// it drops to 0 only when a server ignores the Range request and the
	// download restarts.
	Progress func(Progress)
	// Force downloads even when the model's file already exists.
	Force bool
	// Retries is how many more attempts follow a transfer error
	// (ErrTransfer), each resuming where the last stopped.
	Retries int
	// RetryDelay is the wait before attempt n+1 (n from 1); nil means
	// 1s, 2s, 4s … capped at 30s.
	RetryDelay func(attempt int) time.Duration
	// Log receives warnings (restarts, retries); nil discards them.
	Log *slog.Logger
}

// Progress is a download's state, as reported to PullOptions.Progress.
type Progress struct {
	Model string
	// Bytes is how much of the file is on disk.
	Bytes int64
	// TotalBytes is the file's size; -1 while the server has not said.
	TotalBytes int64
	// ResumedBytes is where this attempt started: the part of Bytes that an
	// earlier attempt or an earlier pull left in the partial file.
	ResumedBytes int64
	// Attempt counts from 1.
	Attempt int
	// Verifying is true once the file is complete and is being hashed.
	Verifying bool
}

// PullResult says what Pull did.
type PullResult struct {
	Model string `json:"model"`
	Path  string `json:"path"`
	URL   string `json:"url"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA1 is the file's checksum ("" when Existed).
	SHA1 string `json:"sha1,omitempty"`
	// Verified is true when SHA1 matched a published or given checksum;
	// false when there was none to compare with.
	Verified bool `json:"verified"`
	// ResumedBytes were found in a partial file and not downloaded again.
	ResumedBytes int64 `json:"resumed_bytes"`
	// DownloadedBytes were received in this call, over all attempts.
	DownloadedBytes int64 `json:"downloaded_bytes"`
	Attempts        int   `json:"attempts"`
	// Existed is true when the file was already there and nothing was done.
	Existed bool `json:"existed,omitempty"`
}

// Pull downloads the whisper.cpp model name into opts.Dir as
// ggml-NAME.bin. The bytes go to ggml-NAME.bin.partial first; a partial
// file left by an earlier pull is resumed with an HTTP Range request (a
// server that ignores Range restarts it from 0). The complete file is
// checked against the catalog's SHA-1: on a mismatch it is deleted and the
// error (ErrChecksum) names the model and both checksums; on a match it is
// renamed into place atomically. Cancelling ctx stops the transfer and
// keeps the partial file for the next pull. An existing ggml-NAME.bin is
// left alone unless opts.Force. A failed pull leaves no empty partial file
// (nor the models directory, when it made it and it stays empty); a server
// it cannot reach at all fails at once with ErrUnreachable, saying what to
// do instead.
func Pull(ctx context.Context, name string, opts PullOptions) (PullResult, error) {
	p, err := newPuller(name, opts)
	if err != nil {
		return PullResult{}, err
	}
	if !opts.Force {
		if st, err := os.Stat(p.final); err == nil && !st.IsDir() {
			return PullResult{Model: name, Path: p.final, URL: p.url, Bytes: st.Size(), Existed: true}, nil
		}
	}
	_, statErr := os.Stat(opts.Dir)
	madeDir := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return PullResult{}, fmt.Errorf("pull %s: %w", name, err)
	}
	f, err := openLocked(p.final + PartialSuffix)
	if err != nil {
		return PullResult{}, fmt.Errorf("pull %s: %w", name, err)
	}
	defer f.Close()
	res, err := p.run(ctx, f)
	if err != nil {
		p.leaveNothing(f, madeDir)
	}
	return res, err
}

// leaveNothing removes what a failed pull made and no later pull needs: an
// empty partial file (still locked, so no other pull is using it) and the
// models directory when this pull made it and it is empty. A partial file
// with bytes in it stays for the next pull to resume.
func (p *puller) leaveNothing(f *os.File, madeDir bool) {
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.log.Warn("could not remove the empty partial file", "path", f.Name(), "err", err)
		}
	}
	if madeDir {
		_ = os.Remove(p.opts.Dir) // fails, as it should, when the directory is not empty
	}
}

// puller is one Pull's state.
type puller struct {
	opts    PullOptions
	entry   Entry
	want    string // expected SHA-1, "" for none
	url     string
	final   string
	log     *slog.Logger
	res     PullResult
	attempt int
}

func newPuller(name string, opts PullOptions) (*puller, error) {
	cat := opts.Catalog
	if cat == nil {
		cat = DefaultCatalog()
	}
	entry, ok := cat.Lookup(name)
	if !ok || name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, fmt.Errorf("pull %q: not a whisper.cpp model name (known: %s): %w", name, cat.Names(), ErrUnknownModel)
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("pull %s: no models directory", name)
	}
	want := strings.ToLower(strings.TrimSpace(opts.SHA1))
	if want == "" {
		want = entry.SHA1
	} else if b, err := hex.DecodeString(want); err != nil || len(b) != sha1.Size {
		return nil, fmt.Errorf("pull %s: SHA-1 %q: want 40 hex digits", name, opts.SHA1)
	}
	base := opts.BaseURL
	if base == "" || base == config.DefaultModelsURL {
		base = config.DefaultModelsURL
		if entry.BaseURL != "" {
			base = entry.BaseURL
		}
	}
	u, err := url.JoinPath(base, entry.FileName())
	if err != nil {
		return nil, fmt.Errorf("pull %s: base URL %q: %w", name, base, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	final := filepath.Join(opts.Dir, entry.FileName())
	return &puller{opts: opts, entry: entry, want: want, url: u, final: final, log: log,
		res: PullResult{Model: name, Path: final, URL: u}}, nil
}

// openLocked opens (creating) the partial file and takes an exclusive
// flock on it, failing with ErrBusy when another pull holds it.
func openLocked(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrBusy)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func (p *puller) run(ctx context.Context, f *os.File) (PullResult, error) {
	st, err := f.Stat()
	if err != nil {
		return p.res, fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	p.res.ResumedBytes = st.Size()
	for p.attempt = 1; ; p.attempt++ {
		p.res.Attempts = p.attempt
		err := p.fetch(ctx, f)
		if err == nil {
			break
		}
		if cause := unreachable(err); cause != nil {
			return p.res, p.unreachableError(f, cause)
		}
		if !errors.Is(err, ErrTransfer) || p.attempt > p.opts.Retries || ctx.Err() != nil {
			return p.res, err
		}
		delay := p.retryDelay(p.attempt)
		p.log.Warn("model download interrupted; resuming", "model", p.entry.Name, "attempt", p.attempt, "retry_in", delay, "err", err)
		if err := sleep(ctx, delay); err != nil {
			return p.res, fmt.Errorf("pull %s: %w", p.entry.Name, err)
		}
	}
	if err := p.verify(ctx, f); err != nil {
		return p.res, err
	}
	if err := commit(f, p.final); err != nil {
		return p.res, fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	return p.res, nil
}

// unreachable returns the network error of a request that reached no
// server (the name did not resolve, the connection was refused or timed
// out, no route), or nil. Such a failure is not a dropped transfer: a retry
// a few seconds later would only fail the same way.
func unreachable(err error) error {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return op
	}
	return nil
}

// unreachableError says what failed and what to do instead.
func (p *puller) unreachableError(f *os.File, cause error) error {
	kept := "nothing was downloaded"
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		kept = fmt.Sprintf("the %d bytes in %s are kept for the next pull", st.Size(), f.Name())
	}
	host := p.url
	if u, err := url.Parse(p.url); err == nil {
		host = u.Host
	}
	return fmt.Errorf("pull %s: cannot reach %s for %s (%v); %s. Set [models] url (or --url) to a server this machine can reach, or copy %s into %s: %w",
		p.entry.Name, host, p.url, cause, kept, p.entry.FileName(), p.opts.Dir, ErrUnreachable)
}

func (p *puller) retryDelay(attempt int) time.Duration {
	if p.opts.RetryDelay != nil {
		return p.opts.RetryDelay(attempt)
	}
	return min(30*time.Second, time.Second<<min(attempt-1, 5))
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (p *puller) report(pr Progress) {
	if p.opts.Progress != nil {
		pr.Model, pr.Attempt = p.entry.Name, p.attempt
		p.opts.Progress(pr)
	}
}

// verify hashes the complete file and compares it with the expected
// checksum; a mismatch deletes the file.
func (p *puller) verify(ctx context.Context, f *os.File) error {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("pull %s: %w", p.entry.Name, err)
	}
	p.res.Bytes = size
	p.report(Progress{Bytes: size, TotalBytes: size, ResumedBytes: p.res.ResumedBytes, Verifying: true})
	sum, err := sha1File(ctx, f)
	if err != nil {
		return fmt.Errorf("pull %s: hash: %w", p.entry.Name, err)
	}
	p.res.SHA1 = sum
	if p.want == "" {
		p.log.Warn("no published SHA-1 for this model: not verified", "model", p.entry.Name, "sha1", sum)
		return nil
	}
	if sum != p.want {
		rmErr := os.Remove(f.Name())
		what := "deleted " + f.Name()
		if rmErr != nil {
			what = "could not delete it: " + rmErr.Error()
		}
		return fmt.Errorf("pull %s: SHA-1 mismatch for %s: expected %s, got %s; %s: %w",
			p.entry.Name, p.entry.FileName(), p.want, sum, what, ErrChecksum)
	}
	p.res.Verified = true
	return nil
}

// sha1File hashes f from its start, stopping when ctx ends.
func sha1File(ctx context.Context, f *os.File) (string, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	h := sha1.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", err
		}
	}
}

// commit makes the verified partial file the model file: synced, renamed
// over final, and the directory synced.
func commit(f *os.File, final string) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(final))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Dir(final), err)
	}
	return nil
}
