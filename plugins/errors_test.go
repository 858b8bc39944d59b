package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/plugintest"
)

// sentinels and the gRPC codes they travel as (documented in backend.proto).
var sentinels = []struct {
	err  error
	code codes.Code
}{
	{plugins.ErrModelNotFound, codes.NotFound},
	{plugins.ErrBadModel, codes.InvalidArgument},
	{plugins.ErrBadAudio, codes.InvalidArgument},
	{plugins.ErrBadRequest, codes.InvalidArgument},
	{plugins.ErrOutOfMemory, codes.ResourceExhausted},
	{plugins.ErrNotLoaded, codes.FailedPrecondition},
	{plugins.ErrUnavailable, codes.Unavailable},
}

// failing returns a backend whose every method fails with err.
func failing(err error) *stub {
	return &stub{
		info: func(context.Context) (plugins.Info, error) { return plugins.Info{}, err },
		load: func(context.Context, plugins.LoadRequest) (plugins.MemoryReport, error) {
			return plugins.MemoryReport{}, err
		},
		unload: func(context.Context) error { return err },
		health: func(context.Context) error { return err },
		transcribe: func(context.Context, plugins.TranscribeRequest, func(plugins.Event) error) (plugins.Result, error) {
			return plugins.Result{}, err
		},
	}
}

// calls runs each Backend method and returns its error, by name.
func calls(ctx context.Context, b plugins.Backend) map[string]error {
	_, info := b.Info(ctx)
	_, load := b.Load(ctx, plugins.LoadRequest{})
	_, transcribe := b.Transcribe(ctx, plugins.TranscribeRequest{}, nil)
	return map[string]error{
		"Info": info, "Load": load, "Transcribe": transcribe,
		"Unload": b.Unload(ctx), "Health": b.Health(ctx),
	}
}

// TestSentinelsCrossTheWire checks that each sentinel a Go backend wraps
// arrives at the host as that sentinel and no other, with the backend's
// message and the documented gRPC code, from every method.
func TestSentinelsCrossTheWire(t *testing.T) {
	for _, tt := range sentinels {
		t.Run(tt.err.Error(), func(t *testing.T) {
			b := plugintest.Connect(t, failing(fmt.Errorf("cuda malloc 2 GiB on GPU-1234: %w", tt.err)))
			for method, err := range calls(t.Context(), b) {
				for _, other := range sentinels {
					if got, want := errors.Is(err, other.err), other.err == tt.err; got != want {
						t.Errorf("%s: errors.Is(%v, %v) = %v, want %v", method, err, other.err, got, want)
					}
				}
				if !strings.Contains(err.Error(), "cuda malloc 2 GiB on GPU-1234") {
					t.Errorf("%s: error %q lost the backend's message", method, err)
				}
				var remote *plugins.RemoteError
				if !errors.As(err, &remote) || remote.Code != tt.code {
					t.Errorf("%s: %#v is not a *RemoteError with code %v", method, err, tt.code)
				}
			}
		})
	}
}

// TestErrorCodes checks errors that are not wrapped sentinels: plain errors,
// context errors, and bare gRPC statuses as a backend in another language
// would send them.
func TestErrorCodes(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantIs   error // nil: no sentinel applies
		wantCode codes.Code
	}{
		{"plain error", errors.New("segfault in decoder"), nil, codes.Unknown},
		{"canceled", fmt.Errorf("decode: %w", context.Canceled), context.Canceled, codes.Canceled},
		{"deadline", context.DeadlineExceeded, context.DeadlineExceeded, codes.DeadlineExceeded},
		{"bare RESOURCE_EXHAUSTED", status.Error(codes.ResourceExhausted, "CUDA OOM"), plugins.ErrOutOfMemory, codes.ResourceExhausted},
		{"bare NOT_FOUND", status.Error(codes.NotFound, "no such model"), plugins.ErrModelNotFound, codes.NotFound},
		{"bare INVALID_ARGUMENT", status.Error(codes.InvalidArgument, "beam_size < 0"), plugins.ErrBadRequest, codes.InvalidArgument},
		{"bare FAILED_PRECONDITION", status.Error(codes.FailedPrecondition, "load first"), plugins.ErrNotLoaded, codes.FailedPrecondition},
		{"bare UNAVAILABLE", status.Error(codes.Unavailable, "device lost"), plugins.ErrUnavailable, codes.Unavailable},
		{"bare INTERNAL", status.Error(codes.Internal, "bug"), nil, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := plugintest.Connect(t, failing(tt.err))
			for method, err := range calls(t.Context(), b) {
				var remote *plugins.RemoteError
				if !errors.As(err, &remote) {
					t.Fatalf("%s: %v is not a *RemoteError", method, err)
				}
				if remote.Code != tt.wantCode {
					t.Errorf("%s: code %v, want %v", method, remote.Code, tt.wantCode)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("%s: %v is not %v", method, err, tt.wantIs)
				}
				if tt.wantIs == nil && errors.Unwrap(remote) != nil {
					t.Errorf("%s: %v unwraps to %v, want nothing", method, err, errors.Unwrap(remote))
				}
			}
		})
	}
}
