package transcript

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

var jfk = Transcript{
	Language: "en", Duration: 11 * time.Second,
	Text: " And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.",
	Segments: []Segment{
		{Start: 0, End: 7600 * time.Millisecond, Text: " And so my fellow Americans, ask not what your country can do for you,"},
		{Start: 7600 * time.Millisecond, End: 3723456 * time.Millisecond, Text: " ask what you can do for your country."},
	},
}

func TestRender(t *testing.T) {
	tests := []struct{ format, ctype, body string }{
		{"json", "application/json", `{"text":"And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country."}`},
		{"text", "text/plain; charset=utf-8", "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.\n"},
		{"txt", "text/plain; charset=utf-8", "And so my fellow Americans, ask not what your country can do for you, ask what you can do for your country.\n"},
		{"srt", "text/plain; charset=utf-8", "1\n00:00:00,000 --> 00:00:07,600\nAnd so my fellow Americans, ask not what your country can do for you,\n\n2\n00:00:07,600 --> 01:02:03,456\nask what you can do for your country.\n\n"},
		{"vtt", "text/plain; charset=utf-8", "WEBVTT\n\n00:00:00.000 --> 00:00:07.600\nAnd so my fellow Americans, ask not what your country can do for you,\n\n00:00:07.600 --> 01:02:03.456\nask what you can do for your country.\n\n"},
	}
	for _, tt := range tests {
		ct, body, err := Render(tt.format, jfk)
		if err != nil || ct != tt.ctype || string(body) != tt.body {
			t.Errorf("%s: %q %q %v\nwant %q %q", tt.format, ct, body, err, tt.ctype, tt.body)
		}
	}
}

func TestVerboseJSON(t *testing.T) {
	ct, body, err := Render("verbose_json", Transcript{Task: "translate", Language: "de", Duration: 8470 * time.Millisecond,
		Text: "hi", Segments: []Segment{{Start: 1230 * time.Millisecond, End: 2 * time.Second, Text: " hi"}}})
	if err != nil || ct != "application/json" {
		t.Fatal(ct, err)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	seg := v["segments"].([]any)[0].(map[string]any)
	if v["task"] != "translate" || v["language"] != "german" || v["duration"] != 8.47 || v["text"] != "hi" ||
		seg["start"] != 1.23 || seg["end"] != 2.0 || seg["seek"] != 123.0 || seg["id"] != 0.0 || seg["tokens"] == nil {
		t.Errorf("verbose_json = %s", body)
	}
}

func TestParseFormat(t *testing.T) {
	if f, err := ParseFormat(""); f != "json" || err != nil {
		t.Errorf("default: %q %v", f, err)
	}
	_, err := ParseFormat("docx")
	if !errors.Is(err, ErrFormat) || err.Error() != `unknown response format "docx": want one of json, text, srt, vtt, verbose_json` {
		t.Errorf("unknown: %v", err)
	}
	if LanguageName("zh") != "chinese" || LanguageName("xx") != "xx" || !IsLanguage("yue") {
		t.Error("language names")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	data, err := json.Marshal(jfk)
	if err != nil {
		t.Fatal(err)
	}
	var back Transcript
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Duration != jfk.Duration || len(back.Segments) != 2 || back.Segments[1].End != jfk.Segments[1].End || back.Text != jfk.Text {
		t.Errorf("round trip: %s -> %+v", data, back)
	}
}
