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
// fields are returned (repeated fields joined by commas).
func (s *Server) readUpload(w http.ResponseWriter, r *http.Request) (map[string]string, string, error) {
	limit := int64(s.cfg.Jobs.MaxUpload)
	s.uploadDeadline(w)
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, "", badRequest("invalid_request", "want multipart/form-data: %v", err)
	}
	form := map[string]string{}
	var path string
	var parts, fieldBytes int
	fail := func(err error) (map[string]string, string, error) {
		s.removeFile(path)
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
			if path, err = s.saveUpload(part, limit); err != nil {
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

func uploadError(err error, limit int64) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return &httpError{status: http.StatusRequestTimeout, code: "upload_timeout", err: fmt.Errorf("the upload did not arrive within [jobs] upload_timeout")}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &httpError{status: http.StatusRequestEntityTooLarge, code: "body_too_large", err: fmt.Errorf("upload is larger than [jobs] max_upload (%d bytes)", limit)}
	}
	return badRequest("invalid_request", "read upload: %v", err)
}

// saveUpload writes a file part into the spool, keeping its extension
// (decoders look at it), mode 0600: at most limit bytes, and no more than
// the spool quota and the free-space floor leave (507 beyond them).
func (s *Server) saveUpload(part io.Reader, limit int64) (string, error) {
	dir := s.spoolDir()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create spool dir: %w", err)
	}
	room, err := s.uploadRoom(limit)
	if err != nil {
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
	path := filepath.Join(dir, "upload-"+hex.EncodeToString(b[:])+ext)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("save upload: %w", err)
	}
	n, err := io.Copy(f, io.LimitReader(part, room+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		os.Remove(path)
		return "", uploadError(err, limit)
	case n > room && room < limit:
		os.Remove(path)
		return "", insufficientStorage("upload stopped at %d bytes: the spool quota ([jobs] spool_quota) or the free-space floor ([jobs] min_free_disk) leaves no more room", n)
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
