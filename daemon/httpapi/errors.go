package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/placement"
)

// httpError is an error with the status and code the API answers with.
type httpError struct {
	status int
	code   string
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(code string, format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, code: code, err: fmt.Errorf(format, args...)}
}

func forbidden(format string, args ...any) error {
	return &httpError{status: http.StatusForbidden, code: "forbidden", err: fmt.Errorf(format, args...)}
}

// errorStatus says how one package's sentinel error is answered.
type errorStatus struct {
	err    error
	status int
	code   string
}

// classify returns err as an *httpError when it is (or wraps) one, or
// matches a sentinel of table (first match wins); nil otherwise.
func classify(err error, table []errorStatus) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	for _, m := range table {
		if errors.Is(err, m.err) {
			return &httpError{status: m.status, code: m.code, err: err}
		}
	}
	return nil
}

// engineStatus maps the placement engine's errors to HTTP.
var engineStatus = []errorStatus{
	// Most specific first: a timeout wraps the no-fit reason.
	{placement.ErrTimeout, http.StatusGatewayTimeout, "timeout"},
	{placement.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{placement.ErrNotFound, http.StatusNotFound, "not_found"},
	{placement.ErrEnded, http.StatusGone, "lease_ended"},
	{placement.ErrNoFit, http.StatusConflict, "no_fit"},
	{placement.ErrTooLarge, http.StatusConflict, "too_large"},
	{placement.ErrNoSuchGPU, http.StatusConflict, "no_such_gpu"},
	{placement.ErrCancelled, http.StatusConflict, "cancelled"},
	{placement.ErrQueueFull, http.StatusServiceUnavailable, "queue_full"},
	{placement.ErrLimit, http.StatusTooManyRequests, "limit_exceeded"},
	{placement.ErrNoInventory, http.StatusServiceUnavailable, "no_inventory"},
	{placement.ErrStopped, http.StatusServiceUnavailable, "shutting_down"},
}

// writeError answers {"error":{"code","message"}} with a fitting status.
func writeError(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "internal"
	if he := classify(err, engineStatus); he != nil {
		status, code = he.status, he.code
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: err.Error()}})
}

// writeJSON answers v as compact JSON, or indented when the request asked
// for ?pretty (see prettyJSON).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	if _, ok := w.(*prettyWriter); ok {
		enc.SetIndent("", "  ")
	}
	_ = enc.Encode(v)
}

// prettyWriter marks a response whose request asked for indented JSON.
type prettyWriter struct{ http.ResponseWriter }

// Unwrap keeps http.ResponseController (flushing) working through it.
func (p *prettyWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// prettyJSON makes writeJSON indent the answers of requests with a
// `pretty` query parameter (?pretty, ?pretty=1); others get compact JSON.
func prettyJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" && r.URL.Query().Has("pretty") {
			w = &prettyWriter{w}
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBody reads a JSON request body strictly: at most api.MaxBodyBytes
// (413 beyond), unknown fields rejected, type errors naming the field. An
// empty body leaves v as it is when optional.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body := http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	return DecodeJSON(body, v, optional)
}

// DecodeJSON is the request decoder, separate from HTTP so it can be fuzzed.
func DecodeJSON(body io.Reader, v any, optional bool) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return badRequest("invalid_json", "request body is empty: want a JSON object")
	default:
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("invalid_json", "request body has data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &tooBig):
		return &httpError{status: http.StatusRequestEntityTooLarge, code: "body_too_large",
			err: fmt.Errorf("request body is larger than %d bytes", tooBig.Limit)}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		return badRequest("invalid_field", "field %s: want %s, got JSON %s", field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return badRequest("invalid_json", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown_field", "%s", strings.TrimPrefix(err.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "request body ends inside the JSON object")
	}
	return badRequest("invalid_json", "malformed JSON: %v", err)
}
