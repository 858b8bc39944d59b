package httpapi

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// deadlines bounds each request on its connection: its body must arrive
// within [daemon] body_timeout (uploads: [jobs] upload_timeout, set by
// readUpload), and each write of the answer must complete within
// [daemon] write_timeout, so a client that stops reading or sending frees
// its connection. Once the body is read the read deadline is lifted: a long
// poll (a lease request waiting in the queue) is not cut short.
func (s *Server) deadlines(next http.Handler) http.Handler {
	body, write := s.cfg.Daemon.BodyTimeout.D(), s.cfg.Daemon.WriteTimeout.D()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(body))
			r.Body = &liftOnEOF{ReadCloser: r.Body, lift: sync.OnceFunc(func() { _ = rc.SetReadDeadline(time.Time{}) }),
				header: w.Header()}
		}
		next.ServeHTTP(&writeDeadline{ResponseWriter: w, rc: rc, d: write}, r)
	})
}

// liftOnEOF lifts the read deadline once the body has been read; a body
// that failed (timed out) closes the connection after the answer.
type liftOnEOF struct {
	io.ReadCloser
	lift   func()
	header http.Header
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.lift()
	case err != nil: // the deadline stays: what is left of the body is not waited for
		b.header.Set("Connection", "close")
	}
	return n, err
}

// writeDeadline sets the write deadline before each write: every write
// (every event of a stream) gets write_timeout to reach the client.
type writeDeadline struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *writeDeadline) WriteHeader(status int) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	w.ResponseWriter.WriteHeader(status)
}

func (w *writeDeadline) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.d))
	return w.ResponseWriter.Write(p)
}

func (w *writeDeadline) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// uploadDeadline gives an upload's body [jobs] upload_timeout to arrive.
func (s *Server) uploadDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.Jobs.UploadTimeout.D()))
}
