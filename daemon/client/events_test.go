package client

import (
	"errors"
	"strings"
	"testing"
)

func TestReadSSE(t *testing.T) {
	stream := ": comment\n\nid: 1\nevent: granted\ndata: {\"a\":1}\n\ndata: line1\ndata: line2\n\nevent: lagged\ndata: {}\n\n"
	var got []string
	err := ReadSSE(strings.NewReader(stream), func(ev, data string) error {
		got = append(got, ev+"="+data)
		return nil
	})
	want := []string{`granted={"a":1}`, "message=line1\nline2", "lagged={}"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("ReadSSE = %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	if err := ReadSSE(strings.NewReader(stream), func(string, string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error not returned: %v", err)
	}
}

// FuzzReadSSE: the event-stream parser never panics and never reports an
// event whose type contains a newline.
func FuzzReadSSE(f *testing.F) {
	f.Add("event: granted\ndata: {}\n\n")
	f.Add("data:\n\n:x\nevent:\n\nid: 9\n")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ReadSSE(strings.NewReader(s), func(ev, _ string) error {
			if strings.ContainsAny(ev, "\r\n") {
				t.Fatalf("event type %q", ev)
			}
			return nil
		})
	})
}
