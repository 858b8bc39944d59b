package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/plugins/plugintest"
)

func TestOutputPaths(t *testing.T) {
	for _, tt := range []struct {
		files []string
		want  string // joined outputs, or the error's start
	}{
		{[]string{"a/jfk.wav", "b/talk.mp3"}, "out/jfk.srt out/talk.srt"},
		{[]string{"jfk.wav", "jfk.mp3", "talk.wav"}, "out/jfk.wav.srt out/jfk.mp3.srt out/talk.srt"},
		{[]string{"a/jfk.wav", "b/jfk.wav"}, "error: a/jfk.wav and b/jfk.wav would both write out/jfk.wav.srt"},
		{[]string{"jfk.wav", "jfk.mp3", "jfk.wav.flac"}, "error: jfk.wav and jfk.wav.flac would both write out/jfk.wav.srt"},
	} {
		outs, err := outputPaths(tt.files, "out", ".srt")
		got := strings.Join(outs, " ")
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("outputPaths(%v) = %q, want %q", tt.files, got, tt.want)
		}
	}
}

// TestTranscribeSameStem: jfk.wav and jfk.mp3 into one --output directory
// give two results, jfk.wav.srt and jfk.mp3.srt, not one overwritten
// jfk.srt (issue 23 item 7).
func TestTranscribeSameStem(t *testing.T) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	wav, mp3 := filepath.Join(e.dir, "jfk.wav"), filepath.Join(e.dir, "jfk.mp3")
	data, _ := os.ReadFile(audio)
	_ = os.WriteFile(wav, data, 0o644)
	_ = os.WriteFile(mp3, data, 0o644)
	e.serve()
	out := filepath.Join(e.dir, "out")
	cmd := e.wsched("transcribe", "--format", "srt", "--output", out, wav, mp3)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("transcribe: %v\n%s", err, stderr.String())
	}
	entries, _ := os.ReadDir(out)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "jfk.mp3.srt jfk.wav.srt" {
		t.Errorf("results %v, want jfk.mp3.srt and jfk.wav.srt\n%s", names, stderr.String())
	}
	// The same name twice is refused before anything is submitted.
	other := filepath.Join(e.dir, "other")
	_ = os.Mkdir(other, 0o755)
	_ = os.WriteFile(filepath.Join(other, "jfk.wav"), data, 0o644)
	msg, err := e.wsched("transcribe", "--output", out, wav, filepath.Join(other, "jfk.wav")).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "would both write") {
		t.Errorf("same name twice: %v\n%s", err, msg)
	}
}

// TestTranscribeBadAudioOneLine: a file the backend cannot decode gives one
// line that names the user's file and the reason, without the daemon's
// spool path (issue 23 item 10).
func TestTranscribeBadAudioOneLine(t *testing.T) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	t.Setenv(plugintest.Env(plugintest.TranscribeError), "bad_audio")
	e.serve()
	cmd := e.wsched("transcribe", audio)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("transcribe of bad audio succeeded")
	}
	text := stderr.String()
	want := audio + ": failed: bad audio"
	if strings.Count(text, want) != 1 || strings.Count(text, "bad audio") != 1 {
		t.Errorf("want one line %q…, got:\n%s", want, text)
	}
	if strings.Contains(text, filepath.Join(e.dir, "state")) || strings.Contains(text, "upload") {
		t.Errorf("the error names the daemon's spool copy:\n%s", text)
	}
}

// TestCancelDeletesFinished: `wsched cancel ID` on a finished job deletes
// it (DELETE /v1/jobs/ID), and the job is gone from `wsched jobs`.
func TestCancelDeletesFinished(t *testing.T) {
	e := newE2E(t)
	audio := e.withFakeBackend(t)
	e.serve()
	if out, err := e.wsched("transcribe", audio).CombinedOutput(); err != nil {
		t.Fatalf("transcribe: %v\n%s", err, out)
	}
	c := e.client()
	defer c.Close()
	js, err := c.Jobs(context.Background())
	if err != nil || len(js) != 1 {
		t.Fatalf("jobs: %v %v", js, err)
	}
	out, err := e.wsched("cancel", js[0].ID).CombinedOutput()
	if want := js[0].ID + " deleted (it was completed)\n"; err != nil || string(out) != want {
		t.Errorf("cancel of a completed job: %v %q, want %q", err, out, want)
	}
	if out, err := e.wsched("jobs").CombinedOutput(); err != nil || !strings.Contains(string(out), "no jobs") {
		t.Errorf("jobs after the delete: %v\n%s", err, out)
	}
}
