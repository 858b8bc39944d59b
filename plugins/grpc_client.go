package plugins

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "github.com/wsched/wsched/plugins/proto"
)

// grpcClient runs in the host and implements Backend over gRPC.
type grpcClient struct {
	client pb.BackendClient
}

var _ Backend = (*grpcClient)(nil)

func (c *grpcClient) Info(ctx context.Context) (Info, error) {
	resp, err := c.client.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return Info{}, fmt.Errorf("plugins: info: %w", fromStatus(err))
	}
	return infoFromProto(resp)
}

func (c *grpcClient) Load(ctx context.Context, req LoadRequest) (MemoryReport, error) {
	resp, err := c.client.Load(ctx, loadToProto(req))
	if err != nil {
		return MemoryReport{}, fmt.Errorf("plugins: load %s on %s: %w", req.ModelPath, req.Device, fromStatus(err))
	}
	return memoryFromProto(resp.GetMemory()), nil
}

func (c *grpcClient) Unload(ctx context.Context) error {
	if _, err := c.client.Unload(ctx, &pb.UnloadRequest{}); err != nil {
		return fmt.Errorf("plugins: unload: %w", fromStatus(err))
	}
	return nil
}

func (c *grpcClient) Health(ctx context.Context) error {
	if _, err := c.client.Health(ctx, &pb.HealthRequest{}); err != nil {
		return fmt.Errorf("plugins: health: %w", fromStatus(err))
	}
	return nil
}

// Transcribe passes progress and segments to emit (which may be nil) as they
// arrive. When emit returns an error the call is cancelled and the error
// returned; the backend sees its context cancelled.
func (c *grpcClient) Transcribe(ctx context.Context, req TranscribeRequest, emit func(Event) error) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if emit == nil {
		emit = func(Event) error { return nil }
	}
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("plugins: transcribe %s: %w", req.AudioPath, err)
	}
	stream, err := c.client.Transcribe(ctx, transcribeToProto(req))
	if err != nil {
		return fail(fromStatus(err))
	}
	var segs []Segment
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fail(fmt.Errorf("%w: %w", ErrUnavailable, errNoResult))
		}
		if err != nil {
			return fail(fromStatus(err))
		}
		var ev Event
		switch m := msg.GetEvent().(type) {
		case *pb.TranscribeResponse_Progress:
			ev = ProgressEvent(m.Progress.GetPercent())
		case *pb.TranscribeResponse_Segment:
			ev = SegmentEvent(segmentFromProto(m.Segment))
			segs = append(segs, ev.Segment)
		case *pb.TranscribeResponse_Result:
			return Result{
				Language:     m.Result.GetLanguage(),
				Duration:     m.Result.GetDuration().AsDuration(),
				Text:         m.Result.GetText(),
				Segments:     segs,
				StreamMemory: memoryFromProto(m.Result.GetStreamMemory()),
			}, nil
		default:
			continue // an event kind newer than this host; skip it
		}
		if err := emit(ev); err != nil {
			return fail(err)
		}
	}
}
