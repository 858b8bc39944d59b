package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits on the non-file part of a multipart form: each field, all fields
// together, and the number of parts.
const (
	maxFormField  = 64 << 10
	maxFormFields = 256 << 10
	maxFormParts  = 64
)

// readUpload streams a multipart form: the "file" part goes to
// the spool ([jobs] spool_dir; at most [jobs] max_upload), the other
// fields are returned (repeated fields joined by commas). Spool room for
// the body's Content-Length (at most max_upload) is reserved before any of
// it is read: concurrent uploads cannot pass [jobs] spool_quota or
// min_free_disk together (507 at once); a body of unknown length reserves
// as it streams.
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (map[string]string, string, error) {
	limit := int64(s.cfg.Jobs.MaxUpload)
	s.uploadDeadline(w)
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, "", badRequest("invalid_request", "want multipart/form-data: %v", err)
	}
	res, err := s.reserveSpool(max(0, min(r.ContentLength, limit)))
	if err != nil {
		closeAfter(w, err)
		return nil, "", err
	}
	defer res.release()
	form := map[string]string{}
	var path string
	var parts, fieldBytes int
	fail := func(err error) (map[string]string, string, error) {
		s.removeFile(path)
		closeAfter(w, err)
		return nil, "", err
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(uploadError(err, limit))
		}
		if parts++; parts > maxFormParts {
			return fail(badRequest("invalid_request", "more than %d form parts", maxFormParts))
		}
		name := part.FormName()
		if name == "file" && part.FileName() != "" {
			if path != "" {
				return fail(badRequest("invalid_request", "more than one file part"))
			}
			if path, err = s.saveUploadWithin(part, limit, res); err != nil {
				return fail(err)
			}
			continue
		}
		val, err := io.ReadAll(io.LimitReader(part, maxFormField+1))
		if err != nil {
			return fail(uploadError(err, limit))
		}
		if len(val) > maxFormField {
			return fail(badRequest("invalid_field", "field %s is longer than %d bytes", name, maxFormField))
		}
		if fieldBytes += len(val); fieldBytes > maxFormFields {
			return fail(badRequest("invalid_request", "form fields hold more than %d bytes", maxFormFields))
		}
		if old, ok := form[name]; ok {
			form[name] = old + "," + string(val)
		} else {
			form[name] = string(val)
		}
	}
	return form, path, nil
}

// closeAfter closes the connection after a 507: the answer goes out at
// once, instead of after the server read the rest of a body the spool
// has no room for.
func closeAfter(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusInsufficientStorage {
		w.Header().Set("Connection", "close")
	}
}

func uploadError(err error, limit int64) error {
	var he *httpError
	if errors.As(err, &he) {
		return err
	}
	if isNoSpace(err) {
		return insufficientStorage("the spool's file system is full: %v", err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpError{status: http.StatusRequestTimeout, code: "upload_timeout", err: fmt.Errorf("the upload did not arrive within [jobs] upload_timeout")}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", err: fmt.Errorf("upload is larger than [jobs] max_upload (%d bytes)", limit)}
	}
	return badRequest("invalid_request", "read upload: %v", err)
}

// isNoSpace reports a full file system or an exhausted disk quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// saveUpload writes a file into the spool (audio taken by path or passed
// descriptor), reserving spool room as it streams.
func (s *Server) saveUpload(part io.Reader, limit int64) (string, error) {
	res, err := s.reserveSpool(0)
	if err != nil {
		return "", err
	}
	defer res.release()
	return s.saveUploadWithin(part, limit, res)
}

// saveUploadWithin writes a file part into the spool, keeping its
// extension (decoders look at it), mode 0600: at most limit bytes, within
// res, which grows as the data streams in while the spool quota and the
// free-space floor leave room (507 beyond them, and when the file system
// is full).
func (s *Server) saveUploadWithin(part io.Reader, limit int64, res *reservation) (string, error) {
	dir := s.spoolDir()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", uploadError(fmt.Errorf("create spool dir: %w", err), limit)
	}
	if err := res.grow(0); err != nil { // the disk, as it is now
		return "", err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	ext := ""
	if p, ok := part.(interface{ FileName() string }); ok {
		ext = strings.ToLower(filepath.Ext(p.FileName()))
		if len(ext) > 8 || strings.ContainsAny(ext, "/\\") {
			ext = ""
		}
	}
	path := filepath.Join(dir, uploadPrefix+hex.EncodeToString(b[:])+ext)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if isNoSpace(err) {
			return "", uploadError(err, limit)
		}
		return "", fmt.Errorf("save upload: %w", err)
	}
	w := &spoolWriter{f: f, res: res, limit: limit}
	n, err := io.Copy(w, io.LimitReader(part, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case res.failed != nil:
		os.Remove(path)
		var he *httpError
		if errors.As(res.failed, &he) {
			return "", &httpError{status: he.status, code: he.code, err: fmt.Errorf("upload stopped at %d bytes: %w", n, he.err)}
		}
		return "", fmt.Errorf("upload stopped at %d bytes: %w", n, res.failed)
	case err != nil:
		os.Remove(path)
		return "", uploadError(err, limit)
	case n > limit:
		os.Remove(path)
		return "", uploadError(&http.MaxBytesError{Limit: limit}, limit)
	case n == 0:
		os.Remove(path)
		return "", badRequest("invalid_request", "the uploaded file is empty")
	}
	return path, nil
}

func (s *Server) removeFile(path string) {
	if path != "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			s.log.Warn("cannot remove upload", "path", path, "err", err)
		}
	}
}
