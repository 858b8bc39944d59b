package plugins

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors a backend wraps and the host tests with errors.Is. They
// cross the process boundary as gRPC codes plus a google.rpc.ErrorInfo reason.
var (
	ErrModelNotFound = errors.New("model not found")
	ErrBadModel      = errors.New("model cannot be loaded")
	ErrBadAudio      = errors.New("bad audio")
	ErrBadRequest    = errors.New("bad request")
	ErrOutOfMemory   = errors.New("out of memory")
	ErrNotLoaded     = errors.New("no model loaded")
	ErrUnavailable   = errors.New("backend unavailable")

	// errEmitAfterReturn is returned by emit once Transcribe has returned.
	errEmitAfterReturn = errors.New("plugins: emit called after Transcribe returned")
	// errNoResult: the stream ended cleanly without a result message.
	errNoResult = errors.New("stream ended without a result")
)

// errorDomain is the ErrorInfo domain of wsched's reasons.
const errorDomain = "wsched.backend.v1"

// wireError is how one sentinel error travels.
type wireError struct {
	err    error
	code   codes.Code
	reason string
}

// wireErrors lists each sentinel's code and reason. Where codes repeat, the
// first entry is the one a bare code (no ErrorInfo) maps back to.
func wireErrors() [7]wireError {
	return [...]wireError{
		{ErrModelNotFound, codes.NotFound, "MODEL_NOT_FOUND"},
		{ErrBadRequest, codes.InvalidArgument, "BAD_REQUEST"},
		{ErrBadModel, codes.InvalidArgument, "BAD_MODEL"},
		{ErrBadAudio, codes.InvalidArgument, "BAD_AUDIO"},
		{ErrOutOfMemory, codes.ResourceExhausted, "OUT_OF_MEMORY"},
		{ErrNotLoaded, codes.FailedPrecondition, "NOT_LOADED"},
		{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	}
}

// toStatus turns a backend's error into the gRPC status the host receives.
// The message is the backend's whole error text.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (e.g. from a nested gRPC call)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	for _, w := range wireErrors() {
		if errors.Is(err, w.err) {
			st := status.New(w.code, err.Error())
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: w.reason, Domain: errorDomain}); derr == nil {
				st = d
			}
			return st.Err()
		}
	}
	return status.New(codes.Unknown, err.Error()).Err()
}

// RemoteError is an error returned by a backend process. It unwraps to the
// matching sentinel (or context error) and prints the backend's message.
type RemoteError struct {
	Code    codes.Code // gRPC code as received
	Message string     // the backend's error text
	err     error      // sentinel or context error; nil when none applies
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel error the code or reason maps to, if any.
func (e *RemoteError) Unwrap() error { return e.err }

// fromStatus turns an error from a gRPC call back into a Go error that
// unwraps to the matching sentinel.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return &RemoteError{Code: st.Code(), Message: st.Message(), err: sentinelFor(st)}
}

func sentinelFor(st *status.Status) error {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			for _, w := range wireErrors() {
				if w.reason == info.GetReason() {
					return w.err
				}
			}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return context.Canceled
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	}
	for _, w := range wireErrors() {
		if w.code == st.Code() {
			return w.err
		}
	}
	return nil
}
