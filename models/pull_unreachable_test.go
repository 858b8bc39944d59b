package models

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refusedURL is a loopback address nothing listens on (a listener bound
// and closed): connecting is refused, with no external network involved.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/whisper.cpp"
}

// TestPullUnreachable: a server that cannot be reached fails the pull at
// once (no retries), says what failed and what to do, and leaves neither a
// 0-byte partial file nor the models directory it made; a partial file
// with bytes in it stays for a later resume.
func TestPullUnreachable(t *testing.T) {
	base := refusedURL(t)
	retries := 0
	opts := PullOptions{Dir: filepath.Join(t.TempDir(), "models"), BaseURL: base, Catalog: Catalog{{Name: "tiny"}},
		Retries: 3, RetryDelay: func(int) time.Duration { retries++; return 0 }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := Pull(ctx, "tiny", opts)
	if !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTransfer) {
		t.Fatalf("error %v, want ErrUnreachable (and not ErrTransfer)", err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/whisper.cpp")
	for _, want := range []string{"pull tiny: cannot reach " + host, "connection refused", "nothing was downloaded",
		"Set [models] url (or --url) to a server this machine can reach", "or copy ggml-tiny.bin into " + opts.Dir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if retries != 0 || res.Attempts != 1 {
		t.Errorf("%d retries, %d attempts: an unreachable server is not retried", retries, res.Attempts)
	}
	assertGone(t, filepath.Join(opts.Dir, "ggml-tiny.bin"+PartialSuffix))
	assertGone(t, opts.Dir)

	writePartial(t, opts.Dir, []byte("abc"))
	_, err = Pull(ctx, "tiny", opts)
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "the 3 bytes in ") {
		t.Errorf("with a partial file: %v", err)
	}
	if part := readFile(t, filepath.Join(opts.Dir, "ggml-tiny.bin"+PartialSuffix)); string(part) != "abc" {
		t.Errorf("partial file now %q, want it kept", part)
	}
}

// TestPullRefusedLeavesNoEmptyPartial: a 404 leaves no 0-byte partial file
// in a models directory that already existed (and keeps the directory).
func TestPullRefusedLeavesNoEmptyPartial(t *testing.T) {
	s := newServer(t, nil, func(_ *server, w http.ResponseWriter, _ *http.Request, _ int) { http.NotFound(w, nil) })
	opts := options(t, s, "")
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Pull(context.Background(), "tiny", opts); !errors.Is(err, ErrHTTP) {
		t.Fatalf("error %v, want ErrHTTP", err)
	}
	assertGone(t, filepath.Join(opts.Dir, "ggml-tiny.bin"+PartialSuffix))
	if _, err := os.Stat(opts.Dir); err != nil {
		t.Errorf("the existing models directory: %v", err)
	}
}
