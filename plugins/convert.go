package plugins

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/wsched/wsched/plugins/proto"
)

// Conversions between the SDK's types and the generated protobuf messages.
// Maps and slices are copied so neither side aliases the other's memory.

func infoToProto(i Info) *pb.InfoResponse {
	return &pb.InfoResponse{
		Name:           i.Name,
		Version:        i.Version,
		ModelFormats:   append([]string(nil), i.ModelFormats...),
		Devices:        append([]string(nil), i.Devices...),
		Metadata:       maps.Clone(i.Metadata),
		Pids:           pidsToProto(i.PIDs),
		DescriptorJson: descriptorJSON(i),
	}
}

// descriptorJSON encodes a backend's descriptor, with the formats and
// devices of its Info where the descriptor leaves them out; nil when it has
// none.
func descriptorJSON(i Info) []byte {
	d := i.Descriptor
	if d.IsZero() {
		return nil
	}
	if len(d.Formats) == 0 {
		d.Formats = i.ModelFormats
	}
	if len(d.Devices) == 0 {
		d.Devices = i.Devices
	}
	b, err := json.Marshal(d)
	if err != nil { // plain data: cannot happen
		return nil
	}
	return b
}

func pidsToProto(pids []int) []int32 {
	var out []int32
	for _, p := range pids {
		out = append(out, int32(p))
	}
	return out
}

func pidsFromProto(pids []int32) []int {
	var out []int
	for _, p := range pids {
		out = append(out, int(p))
	}
	return out
}

func vadToProto(p VADParams) *pb.VadParams {
	if p.IsZero() {
		return nil
	}
	return &pb.VadParams{
		Threshold:    float32(p.Threshold),
		MinSpeechMs:  int32(p.MinSpeech.Milliseconds()),
		MinSilenceMs: int32(p.MinSilence.Milliseconds()),
		MaxSpeechS:   float32(p.MaxSpeech.Seconds()),
		SpeechPadMs:  int32(p.SpeechPad.Milliseconds()),
	}
}

func vadFromProto(m *pb.VadParams) VADParams {
	if m == nil {
		return VADParams{}
	}
	return VADParams{
		Threshold:  float64(m.GetThreshold()),
		MinSpeech:  time.Duration(m.GetMinSpeechMs()) * time.Millisecond,
		MinSilence: time.Duration(m.GetMinSilenceMs()) * time.Millisecond,
		MaxSpeech:  time.Duration(float64(m.GetMaxSpeechS()) * float64(time.Second)),
		SpeechPad:  time.Duration(m.GetSpeechPadMs()) * time.Millisecond,
	}
}

func infoFromProto(m *pb.InfoResponse) (Info, error) {
	i := Info{
		Name:         m.GetName(),
		Version:      m.GetVersion(),
		ModelFormats: m.GetModelFormats(),
		Devices:      m.GetDevices(),
		Metadata:     m.GetMetadata(),
		PIDs:         pidsFromProto(m.GetPids()),
	}
	if b := m.GetDescriptorJson(); len(b) > 0 {
		if err := json.Unmarshal(b, &i.Descriptor); err != nil {
			return Info{}, fmt.Errorf("plugins: info: descriptor: %w", err)
		}
	}
	return i, nil
}

func loadToProto(r LoadRequest) *pb.LoadRequest {
	return &pb.LoadRequest{
		ModelPath:      r.ModelPath,
		Device:         r.Device,
		Threads:        int32(r.Threads),
		FlashAttention: r.FlashAttention,
		VadModelPath:   r.VADModelPath,
		ModelName:      r.ModelName,
		Extra:          maps.Clone(r.Extra),
	}
}

func loadFromProto(m *pb.LoadRequest) LoadRequest {
	return LoadRequest{
		ModelPath:      m.GetModelPath(),
		Device:         m.GetDevice(),
		Threads:        int(m.GetThreads()),
		FlashAttention: m.GetFlashAttention(),
		VADModelPath:   m.GetVadModelPath(),
		ModelName:      m.GetModelName(),
		Extra:          m.GetExtra(),
	}
}

func memoryToProto(r MemoryReport) *pb.MemoryReport {
	return &pb.MemoryReport{
		ModelBytes:   r.ModelBytes,
		KvSelfBytes:  r.KVSelfBytes,
		KvCrossBytes: r.KVCrossBytes,
		KvPadBytes:   r.KVPadBytes,
		ComputeBytes: maps.Clone(r.ComputeBytes),
		TotalBytes:   r.TotalBytes,
	}
}

func memoryFromProto(m *pb.MemoryReport) MemoryReport {
	return MemoryReport{
		ModelBytes:   m.GetModelBytes(),
		KVSelfBytes:  m.GetKvSelfBytes(),
		KVCrossBytes: m.GetKvCrossBytes(),
		KVPadBytes:   m.GetKvPadBytes(),
		ComputeBytes: m.GetComputeBytes(),
		TotalBytes:   m.GetTotalBytes(),
	}
}

func transcribeToProto(r TranscribeRequest) *pb.TranscribeRequest {
	return &pb.TranscribeRequest{
		AudioPath:     r.AudioPath,
		Language:      r.Language,
		Translate:     r.Translate,
		BeamSize:      int32(r.BeamSize),
		BestOf:        int32(r.BestOf),
		InitialPrompt: r.InitialPrompt,
		Vad:           r.VAD,
		VadParams:     vadToProto(r.VADParams),
		Extra:         maps.Clone(r.Extra),
	}
}

func transcribeFromProto(m *pb.TranscribeRequest) TranscribeRequest {
	return TranscribeRequest{
		AudioPath:     m.GetAudioPath(),
		Language:      m.GetLanguage(),
		Translate:     m.GetTranslate(),
		BeamSize:      int(m.GetBeamSize()),
		BestOf:        int(m.GetBestOf()),
		InitialPrompt: m.GetInitialPrompt(),
		VAD:           m.GetVad(),
		VADParams:     vadFromProto(m.GetVadParams()),
		Extra:         m.GetExtra(),
	}
}

func segmentToProto(s Segment) *pb.TranscribeResponse {
	return &pb.TranscribeResponse{Event: &pb.TranscribeResponse_Segment{Segment: &pb.Segment{
		Index: int32(s.Index),
		Start: durationpb.New(s.Start),
		End:   durationpb.New(s.End),
		Text:  s.Text,
	}}}
}

func segmentFromProto(m *pb.Segment) Segment {
	return Segment{
		Index: int(m.GetIndex()),
		Start: m.GetStart().AsDuration(),
		End:   m.GetEnd().AsDuration(),
		Text:  m.GetText(),
	}
}

func progressToProto(percent float64) *pb.TranscribeResponse {
	return &pb.TranscribeResponse{Event: &pb.TranscribeResponse_Progress{Progress: &pb.Progress{Percent: percent}}}
}

func resultToProto(r Result) *pb.TranscribeResponse {
	return &pb.TranscribeResponse{Event: &pb.TranscribeResponse_Result{Result: &pb.TranscribeResult{
		Language:     r.Language,
		Duration:     durationpb.New(r.Duration),
		Text:         r.Text,
		StreamMemory: streamMemoryToProto(r.StreamMemory),
	}}}
}

// streamMemoryToProto leaves a zero report unset on the wire.
func streamMemoryToProto(r MemoryReport) *pb.MemoryReport {
	if r.TotalBytes == 0 && r.ModelBytes == 0 && r.KVSelfBytes == 0 && r.KVCrossBytes == 0 && len(r.ComputeBytes) == 0 {
		return nil
	}
	return memoryToProto(r)
}

// eventToProto converts an event a backend emitted.
func eventToProto(ev Event) (*pb.TranscribeResponse, error) {
	switch ev.Kind {
	case EventProgress:
		return progressToProto(ev.Percent), nil
	case EventSegment:
		return segmentToProto(ev.Segment), nil
	default:
		return nil, fmt.Errorf("plugins: unknown event kind %d", ev.Kind)
	}
}
