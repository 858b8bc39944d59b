package models

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// modelBytes is a fake model file: 3 MiB + 17 bytes of seeded noise.
func modelBytes() []byte {
	b := make([]byte, 3<<20+17)
	r := rand.New(rand.NewChaCha8([32]byte{7}))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sha1Hex(b []byte) string { s := sha1.Sum(b); return hex.EncodeToString(s[:]) }

// server serves one fake model file; handle decides what request n gets.
type server struct {
	*httptest.Server
	t      *testing.T
	data   []byte
	mu     sync.Mutex
	ranges []string // the Range header of each request, in order
	paths  []string
}

func newServer(t *testing.T, data []byte, handle func(s *server, w http.ResponseWriter, r *http.Request, n int)) *server {
	t.Helper()
	s := &server{t: t, data: data}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.ranges)
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.paths = append(s.paths, r.URL.Path)
		s.mu.Unlock()
		handle(s, w, r, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ranges...)
}

// serve answers as a file server does: 200, 206 for a Range, 416 past the end.
func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	http.ServeContent(w, r, "ggml-tiny.bin", time.Time{}, bytes.NewReader(s.data))
}

// sendHead promises the whole file and sends its first n bytes.
func (s *server) sendHead(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
	w.WriteHeader(http.StatusOK)
	w.Write(s.data[:n])
	w.(http.Flusher).Flush()
}

// drop sends the first n bytes of a promised whole file and closes the
// connection.
func (s *server) drop(w http.ResponseWriter, n int) {
	s.sendHead(w, n)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		s.t.Error(err)
		return
	}
	conn.Close()
}

// progressLog records Progress callbacks.
type progressLog struct{ got []Progress }

func (l *progressLog) add(p Progress) { l.got = append(l.got, p) }

// check asserts that Bytes never decreases within an attempt (except, when
// allowRestart, to 0), that the last download callback reaches size, and
// that verification is reported last.
func (l *progressLog) check(t *testing.T, size int64, allowRestart bool) {
	t.Helper()
	if len(l.got) < 2 {
		t.Fatalf("%d progress callbacks", len(l.got))
	}
	for i := 1; i < len(l.got); i++ {
		prev, cur := l.got[i-1], l.got[i]
		restart := allowRestart && cur.Bytes == 0
		if cur.Attempt == prev.Attempt && cur.Bytes < prev.Bytes && !restart {
			t.Fatalf("callback %d: bytes went from %d to %d", i, prev.Bytes, cur.Bytes)
		}
		if cur.Attempt < prev.Attempt {
			t.Fatalf("callback %d: attempt went from %d to %d", i, prev.Attempt, cur.Attempt)
		}
	}
	last := l.got[len(l.got)-1]
	if !last.Verifying || last.Bytes != size || last.TotalBytes != size || last.Model != "tiny" {
		t.Errorf("last callback %+v, want verifying %d bytes", last, size)
	}
	dl := l.got[len(l.got)-2]
	if dl.Verifying || dl.Bytes != size || dl.TotalBytes != size {
		t.Errorf("last download callback %+v, want %d of %d", dl, size, size)
	}
}

func options(t *testing.T, s *server, sum string) PullOptions {
	return PullOptions{
		Dir:     filepath.Join(t.TempDir(), "models"),
		BaseURL: s.URL + "/mirror/",
		Catalog: Catalog{{Name: "base"}, {Name: "tiny", SHA1: sum}},
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: stat error %v, want not exist", path, err)
	}
}

func TestPullDownloadsAndVerifies(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, _ int) { s.serve(w, r) })
	opts := options(t, s, sha1Hex(data))
	var pl progressLog
	opts.Progress = pl.add
	res, err := Pull(context.Background(), "tiny", opts)
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(opts.Dir, "ggml-tiny.bin")
	if !bytes.Equal(readFile(t, final), data) {
		t.Fatal("downloaded file differs from the served one")
	}
	want := PullResult{Model: "tiny", Path: final, URL: s.URL + "/mirror/ggml-tiny.bin", Bytes: int64(len(data)),
		SHA1: sha1Hex(data), Verified: true, DownloadedBytes: int64(len(data)), Attempts: 1}
	if res != want {
		t.Errorf("result\n got %+v\nwant %+v", res, want)
	}
	assertGone(t, final+PartialSuffix)
	if got := s.requests(); len(got) != 1 || got[0] != "" || s.paths[0] != "/mirror/ggml-tiny.bin" {
		t.Errorf("requests: ranges %q, paths %q", got, s.paths)
	}
	pl.check(t, int64(len(data)), false)

	// A second pull finds the file and does nothing; Force downloads again.
	again, err := Pull(context.Background(), "tiny", opts)
	if err != nil || !again.Existed || again.Bytes != int64(len(data)) || len(s.requests()) != 1 {
		t.Errorf("second pull: %+v, %v, %d requests", again, err, len(s.requests()))
	}
	opts.Force, opts.Progress = true, nil
	if forced, err := Pull(context.Background(), "tiny", opts); err != nil || !forced.Verified || len(s.requests()) != 2 {
		t.Errorf("forced pull: %+v, %v", forced, err)
	}
}

// TestPullResumesAfterDrop: the server drops the connection mid-body; the
// partial file keeps what arrived, and the next pull asks for the rest
// with a Range request.
func TestPullResumesAfterDrop(t *testing.T) {
	data := modelBytes()
	const cut = 1<<20 + 3
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			s.drop(w, cut)
			return
		}
		s.serve(w, r)
	})
	opts := options(t, s, sha1Hex(data))
	final := filepath.Join(opts.Dir, "ggml-tiny.bin")
	_, err := Pull(context.Background(), "tiny", opts)
	if !errors.Is(err, ErrTransfer) {
		t.Fatalf("interrupted pull: error %v, want ErrTransfer", err)
	}
	if part := readFile(t, final+PartialSuffix); !bytes.Equal(part, data[:cut]) {
		t.Fatalf("partial file: %d bytes, want the first %d served", len(part), cut)
	}
	assertGone(t, final)

	var pl progressLog
	opts.Progress = pl.add
	res, err := Pull(context.Background(), "tiny", opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.requests(); len(got) != 2 || got[1] != "bytes="+strconv.Itoa(cut)+"-" {
		t.Errorf("Range headers %q, want the second to resume at %d", got, cut)
	}
	if !bytes.Equal(readFile(t, final), data) || !res.Verified || res.ResumedBytes != cut || res.DownloadedBytes != int64(len(data)-cut) {
		t.Errorf("resumed pull: %+v", res)
	}
	if first := pl.got[0]; first.Bytes != cut || first.ResumedBytes != cut || first.TotalBytes != int64(len(data)) {
		t.Errorf("first callback %+v, want %d resumed of %d", first, cut, len(data))
	}
	pl.check(t, int64(len(data)), false)
	assertGone(t, final+PartialSuffix)
}

// TestPullRetriesResume: with Retries, one Pull survives the drop.
func TestPullRetriesResume(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, n int) {
		switch n {
		case 0:
			s.drop(w, 100_000)
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			s.serve(w, r)
		}
	})
	opts := options(t, s, sha1Hex(data))
	opts.Retries = 2
	var delays []int
	opts.RetryDelay = func(n int) time.Duration { delays = append(delays, n); return 0 }
	var pl progressLog
	opts.Progress = pl.add
	res, err := Pull(context.Background(), "tiny", opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 3 || res.ResumedBytes != 0 || res.DownloadedBytes != int64(len(data)) || len(delays) != 2 {
		t.Errorf("result %+v, delays %v", res, delays)
	}
	if got := s.requests(); len(got) != 3 || got[1] != "bytes=100000-" || got[2] != "bytes=100000-" {
		t.Errorf("Range headers %q", got)
	}
	pl.check(t, int64(len(data)), false)
}

func TestPullServerIgnoresRange(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, _ *http.Request, _ int) {
		s.sendHead(w, len(s.data)) // 200 and the whole file, whatever the Range
	})
	for _, tc := range []struct {
		name    string
		partial []byte
	}{
		{"partial is a prefix", data[:500_000]},
		{"partial is garbage", bytes.Repeat([]byte{0xAA}, 700_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := options(t, s, sha1Hex(data))
			writePartial(t, opts.Dir, tc.partial)
			var pl progressLog
			opts.Progress = pl.add
			res, err := Pull(context.Background(), "tiny", opts)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, res.Path), data) || res.ResumedBytes != 0 || res.DownloadedBytes != int64(len(data)) {
				t.Errorf("result %+v", res)
			}
			if got := s.requests(); got[len(got)-1] != "bytes="+strconv.Itoa(len(tc.partial))+"-" {
				t.Errorf("last Range header %q", got[len(got)-1])
			}
			if pl.got[0].Bytes != 0 {
				t.Errorf("first callback %+v, want a restart from 0", pl.got[0])
			}
			pl.check(t, int64(len(data)), true)
		})
	}
}

func writePartial(t *testing.T, dir string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ggml-tiny.bin"+PartialSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPullRangeNotSatisfiable: a 416 for a complete partial file means
// done; for a partial file longer than the model, start over.
func TestPullRangeNotSatisfiable(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, _ int) { s.serve(w, r) })
	tests := []struct {
		name       string
		partial    []byte
		ranges     []string
		downloaded int64
	}{
		{"complete", data, []string{"bytes=" + strconv.Itoa(len(data)) + "-"}, 0},
		{"too long", append(append([]byte{}, data...), "junk"...), []string{"bytes=" + strconv.Itoa(len(data)+4) + "-", ""}, int64(len(data))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(s.requests())
			opts := options(t, s, sha1Hex(data))
			writePartial(t, opts.Dir, tt.partial)
			res, err := Pull(context.Background(), "tiny", opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.requests()[before:]; strings.Join(got, "|") != strings.Join(tt.ranges, "|") {
				t.Errorf("Range headers %q, want %q", got, tt.ranges)
			}
			if !bytes.Equal(readFile(t, res.Path), data) || !res.Verified || res.DownloadedBytes != tt.downloaded {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestPullChecksumMismatch(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, _ int) { s.serve(w, r) })
	wrong := sha1Hex([]byte("the published file"))
	opts := options(t, s, wrong)
	_, err := Pull(context.Background(), "tiny", opts)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("error %v, want ErrChecksum", err)
	}
	final := filepath.Join(opts.Dir, "ggml-tiny.bin")
	want := "pull tiny: SHA-1 mismatch for ggml-tiny.bin: expected " + wrong + ", got " + sha1Hex(data) + "; deleted " + final + PartialSuffix + ": checksum mismatch"
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	assertGone(t, final)
	assertGone(t, final+PartialSuffix)

	// A checksum given by the caller wins over the catalog's.
	opts.SHA1 = strings.ToUpper(sha1Hex(data))
	if res, err := Pull(context.Background(), "tiny", opts); err != nil || !res.Verified {
		t.Errorf("with SHA1 option: %+v, %v", res, err)
	}
}

// TestPullUnverified: a model without a published checksum is saved, and
// the result says it was not verified. The server sends no length.
func TestPullUnverified(t *testing.T) {
	data := modelBytes()
	s := newServer(t, data, func(s *server, w http.ResponseWriter, _ *http.Request, _ int) { w.Write(s.data) })
	opts := options(t, s, "")
	res, err := Pull(context.Background(), "base", opts)
	if err != nil || res.Verified || res.SHA1 != sha1Hex(data) || res.Path != filepath.Join(opts.Dir, "ggml-base.bin") {
		t.Errorf("result %+v, %v", res, err)
	}
}

// TestPullCancelKeepsPartial: cancelling mid-body stops the pull, keeps
// what arrived, and the next pull resumes from it.
func TestPullCancelKeepsPartial(t *testing.T) {
	data := modelBytes()
	const head = 1 << 20
	s := newServer(t, data, func(s *server, w http.ResponseWriter, r *http.Request, n int) {
		if n == 0 {
			s.sendHead(w, head)
			<-r.Context().Done() // stall until the client goes away
			return
		}
		s.serve(w, r)
	})
	opts := options(t, s, sha1Hex(data))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Progress = func(p Progress) {
		if p.Bytes >= head {
			cancel()
		}
	}
	_, err := Pull(ctx, "tiny", opts)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTransfer) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	final := filepath.Join(opts.Dir, "ggml-tiny.bin")
	if part := readFile(t, final+PartialSuffix); !bytes.Equal(part, data[:head]) {
		t.Fatalf("partial file: %d bytes, want the %d sent", len(part), head)
	}
	opts.Progress = nil
	res, err := Pull(context.Background(), "tiny", opts)
	if err != nil || res.ResumedBytes != head || !bytes.Equal(readFile(t, final), data) {
		t.Errorf("resumed: %+v, %v", res, err)
	}
}

func TestPullBusy(t *testing.T) {
	s := newServer(t, nil, func(s *server, w http.ResponseWriter, r *http.Request, _ int) { s.serve(w, r) })
	opts := options(t, s, "")
	writePartial(t, opts.Dir, []byte("x"))
	held, err := openLocked(filepath.Join(opts.Dir, "ggml-tiny.bin"+PartialSuffix))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := Pull(context.Background(), "tiny", opts); !errors.Is(err, ErrBusy) {
		t.Errorf("error %v, want ErrBusy", err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent while busy", n)
	}
}

func TestPullErrors(t *testing.T) {
	s := newServer(t, nil, func(s *server, w http.ResponseWriter, r *http.Request, _ int) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		http.Error(w, "no", code)
	})
	tests := []struct {
		name, model, base, sha1 string
		err                     error
		msg                     string
	}{
		{"unknown", "huge", s.URL, "", ErrUnknownModel, `pull "huge": not a whisper.cpp model name (known: base, tiny): unknown model`},
		{"path", "../tiny", s.URL, "", ErrUnknownModel, `pull "../tiny": not a whisper.cpp model name (known: base, tiny): unknown model`},
		{"404", "tiny", s.URL + "/x?code=404", "", ErrHTTP, "404 Not Found: download refused"},
		{"503", "tiny", s.URL + "/x?code=503", "", ErrTransfer, "503 Service Unavailable: transfer failed"},
		{"bad sha1", "tiny", s.URL, "abc", nil, `pull tiny: SHA-1 "abc": want 40 hex digits`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := PullOptions{Dir: t.TempDir(), BaseURL: tt.base, SHA1: tt.sha1, Catalog: Catalog{{Name: "base"}, {Name: "tiny"}}, Retries: 0}
			_, err := Pull(context.Background(), tt.model, opts)
			if err == nil || (tt.err != nil && !errors.Is(err, tt.err)) || !strings.HasSuffix(err.Error(), tt.msg) {
				t.Errorf("error %v, want %v ending %q", err, tt.err, tt.msg)
			}
		})
	}
}

func TestPullURL(t *testing.T) {
	const tdrz = "https://huggingface.co/akashmjn/tinydiarize-whisper.cpp/resolve/main/ggml-small.en-tdrz.bin"
	tests := []struct{ model, base, want string }{
		{"large-v3-turbo", "", "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-large-v3-turbo.bin"},
		{"small.en-tdrz", "", tdrz},
		{"small.en-tdrz", "https://huggingface.co/ggerganov/whisper.cpp/resolve/main", tdrz},
		{"small.en-tdrz", "http://mirror.local/whisper/", "http://mirror.local/whisper/ggml-small.en-tdrz.bin"},
		{"tiny.en", "http://mirror.local", "http://mirror.local/ggml-tiny.en.bin"},
	}
	for _, tt := range tests {
		p, err := newPuller(tt.model, PullOptions{Dir: "/m", BaseURL: tt.base})
		if err != nil || p.url != tt.want {
			t.Errorf("%s from %q: %q, %v; want %q", tt.model, tt.base, p.url, err, tt.want)
		}
	}
}
