package plugins

import (
	"context"
	"fmt"
	"sync"

	pb "github.com/wsched/wsched/plugins/proto"
)

// grpcServer runs in the backend process and calls the Backend for each RPC.
type grpcServer struct {
	pb.UnimplementedBackendServer
	impl Backend
}

var _ pb.BackendServer = (*grpcServer)(nil)

func (s *grpcServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.InfoResponse, error) {
	info, err := s.impl.Info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return infoToProto(info), nil
}

func (s *grpcServer) Load(ctx context.Context, req *pb.LoadRequest) (*pb.LoadResponse, error) {
	rep, err := s.impl.Load(ctx, loadFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	if rep.TotalBytes == 0 {
		rep.TotalBytes = rep.Sum()
	}
	return &pb.LoadResponse{Memory: memoryToProto(rep)}, nil
}

func (s *grpcServer) Unload(ctx context.Context, _ *pb.UnloadRequest) (*pb.UnloadResponse, error) {
	if err := s.impl.Unload(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pb.UnloadResponse{}, nil
}

func (s *grpcServer) Health(ctx context.Context, _ *pb.HealthRequest) (*pb.HealthResponse, error) {
	if err := s.impl.Health(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pb.HealthResponse{}, nil
}

// Transcribe streams the backend's events, numbering segments in the order
// sent, then any returned segments not yet emitted, then the result.
func (s *grpcServer) Transcribe(req *pb.TranscribeRequest, stream pb.Backend_TranscribeServer) error {
	ctx := stream.Context()
	var (
		mu      sync.Mutex // serialises Send; guards sent and done
		sent    int        // segments sent so far
		done    bool
		sendSeg = func(seg Segment) error {
			seg.Index = sent
			if err := stream.Send(segmentToProto(seg)); err != nil {
				return fmt.Errorf("plugins: send segment: %w", err)
			}
			sent++
			return nil
		}
	)
	emit := func(ev Event) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case done:
			return errEmitAfterReturn
		case ctx.Err() != nil:
			return ctx.Err()
		case ev.Kind == EventSegment:
			return sendSeg(ev.Segment)
		}
		msg, err := eventToProto(ev)
		if err != nil {
			return err
		}
		if err := stream.Send(msg); err != nil {
			return fmt.Errorf("plugins: send progress: %w", err)
		}
		return nil
	}

	res, err := s.impl.Transcribe(ctx, transcribeFromProto(req), emit)
	mu.Lock()
	defer mu.Unlock()
	done = true
	if err != nil {
		return toStatus(err)
	}
	for _, seg := range res.Segments[min(sent, len(res.Segments)):] {
		if err := sendSeg(seg); err != nil {
			return toStatus(err)
		}
	}
	if err := stream.Send(resultToProto(res)); err != nil {
		return toStatus(fmt.Errorf("plugins: send result: %w", err))
	}
	return nil
}
