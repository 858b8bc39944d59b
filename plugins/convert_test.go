package plugins

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/wsched/wsched/plugins/descriptor"
	pb "github.com/wsched/wsched/plugins/proto"
)

// TestVADAndPIDsRoundTrip: the fields added for VAD tuning and an app's
// processes survive the wire (marshalled, unmarshalled, converted back).
func TestVADAndPIDsRoundTrip(t *testing.T) {
	req := TranscribeRequest{AudioPath: "/a.wav", VAD: true, VADParams: VADParams{Threshold: 0.25, MinSpeech: 120 * time.Millisecond,
		MinSilence: 300 * time.Millisecond, MaxSpeech: 15500 * time.Millisecond, SpeechPad: 40 * time.Millisecond}}
	var m pb.TranscribeRequest
	roundTrip(t, transcribeToProto(req), &m)
	if got := transcribeFromProto(&m); !reflect.DeepEqual(got.VADParams, req.VADParams) || !got.VAD {
		t.Errorf("VAD params %+v, want %+v", got.VADParams, req.VADParams)
	}
	if transcribeToProto(TranscribeRequest{}).VadParams != nil {
		t.Error("zero VAD params are sent")
	}
	var im pb.InfoResponse
	roundTrip(t, infoToProto(Info{Name: "exec", PIDs: []int{42, 43}}), &im)
	if got, err := infoFromProto(&im); err != nil || !reflect.DeepEqual(got.PIDs, []int{42, 43}) {
		t.Errorf("PIDs %v, %v", got.PIDs, err)
	}
}

func TestDescriptorRoundTrip(t *testing.T) {
	d := descriptor.Descriptor{Name: "dropin", Profile: "p", Layouts: []descriptor.Layout{{Kind: descriptor.LayoutFile, Prefix: "m-", Suffix: ".bin"}},
		Options: []descriptor.Option{{Name: "beam", Type: descriptor.TypeInt, Default: "2", Help: "beam width"}}}
	var im pb.InfoResponse
	roundTrip(t, infoToProto(Info{Name: "dropin", ModelFormats: []string{"x"}, Devices: []string{"cpu"}, Descriptor: d}), &im)
	got, err := infoFromProto(&im)
	if err != nil {
		t.Fatal(err)
	}
	d.Formats, d.Devices = []string{"x"}, []string{"cpu"} // filled from Info
	if !reflect.DeepEqual(got.Descriptor, d) {
		t.Errorf("descriptor %+v, want %+v", got.Descriptor, d)
	}
	roundTrip(t, infoToProto(Info{Name: "old"}), &im)
	if got, err := infoFromProto(&im); err != nil || !got.Descriptor.IsZero() {
		t.Errorf("no descriptor: got %+v, %v", got.Descriptor, err)
	}
	im.DescriptorJson = []byte("{")
	if _, err := infoFromProto(&im); err == nil {
		t.Error("a bad descriptor is accepted")
	}
}

func roundTrip(t *testing.T, in, out proto.Message) {
	t.Helper()
	data, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}
