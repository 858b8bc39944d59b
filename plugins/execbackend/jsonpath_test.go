package execbackend

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMapAnswer(t *testing.T) {
	for _, tt := range []struct {
		path, body, text string
		segs             int
		end              time.Duration
	}{
		{"result.0.text", `{"result":[{"key":"jfk","text":"and so my fellow americans"}]}`, "and so my fellow americans", 0, 0},
		{"text", `{"text":" hi "}`, "hi", 0, 0},
		{"segments", `{"segments":["a","b"]}`, "a b", 2, 0},
		{"data.sentences", `{"data":{"sentences":[{"text":"a","start":0,"end":1.5},{"text":"b","start":1.5,"end":3}]}}`, "a b", 2, 3 * time.Second},
		{"sentence_info", `{"sentence_info":[{"text":"a","timestamp":[0,2500]}]}`, "a", 1, 2500 * time.Millisecond},
		{"0", `{"0":"key zero"}`, "key zero", 0, 0},
	} {
		p, err := ParseJSONPath(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := MapAnswer([]byte(tt.body), p)
		if err != nil || res.Text != tt.text || len(res.Segments) != tt.segs {
			t.Errorf("%s in %s: %+v %v", tt.path, tt.body, res, err)
			continue
		}
		if tt.segs > 0 && res.Segments[tt.segs-1].End != tt.end {
			t.Errorf("%s: last segment ends at %s, want %s", tt.path, res.Segments[tt.segs-1].End, tt.end)
		}
	}
	for _, tt := range []struct{ path, body, want string }{
		{"result.0.text", `{"result":[]}`, `result.0: index "0" of an array of 0`},
		{"result.text", `{"result":"x"}`, "result.text: result is a string, not an object or array"},
		{"text", `{"text":3}`, "text is a number, want a string"},
		{"text", `{"txt":"a"}`, `no key "text"`},
		{"segments", `{"segments":[{"start":0}]}`, `without a "text" string`},
	} {
		p, _ := ParseJSONPath(tt.path)
		_, err := MapAnswer([]byte(tt.body), p)
		if !errors.Is(err, errNoText) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s in %s: %v, want %q", tt.path, tt.body, err, tt.want)
		}
	}
	if _, err := MapAnswer([]byte("<html>"), JSONPath{"text"}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("html: %v", err)
	}
	for _, bad := range []string{"", ".", "a..b", "a."} {
		if _, err := ParseJSONPath(bad); err == nil {
			t.Errorf("ParseJSONPath(%q) passed", bad)
		}
	}
}

// FuzzMapAnswer: any answer and path either map to a transcript whose
// segments are well-formed, or fail with an error; never a panic.
func FuzzMapAnswer(f *testing.F) {
	f.Add("result.0.text", []byte(`{"result":[{"key":"jfk","text":"hello"}]}`))
	f.Add("segments", []byte(`{"segments":[{"text":"a","start":0,"end":1e308},{"text":"b","timestamp":[-1,5]}]}`))
	f.Add("a.1", []byte(`{"a":[1,"x"]}`))
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		p, err := ParseJSONPath(path)
		if err != nil {
			return
		}
		res, err := MapAnswer(body, p)
		if err != nil {
			return
		}
		for i, s := range res.Segments {
			if s.Index != i || s.Start < 0 || s.End < s.Start || s.End > maxSeconds*time.Second {
				t.Fatalf("segment %d: %+v", i, s)
			}
		}
		if res.Text != strings.TrimSpace(res.Text) {
			t.Fatalf("text %q not trimmed", res.Text)
		}
	})
}

func TestMapOpenAI(t *testing.T) {
	res, err := mapOpenAI([]byte(`{"text":"hi","language":"english","duration":2.5,"segments":[{"id":0,"start":0,"end":2.5,"text":"hi"}]}`))
	if err != nil || res.Text != "hi" || res.Language != "en" || res.Duration != 2500*time.Millisecond || len(res.Segments) != 1 {
		t.Errorf("verbose_json: %+v %v", res, err)
	}
	if res, err := mapOpenAI([]byte("plain text\n")); err != nil || res.Text != "plain text" {
		t.Errorf("text: %+v %v", res, err)
	}
	if _, err := mapOpenAI([]byte(`{"error":"x"}`)); err == nil {
		t.Error("an answer without text passed")
	}
}
