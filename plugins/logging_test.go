package plugins_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/wsched/wsched/plugins"
)

// TestNewLogger checks the keys and formats go-plugin's host parser reads.
func TestNewLogger(t *testing.T) {
	tests := []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug - 4, "trace"},
		{slog.LevelDebug, "debug"},
		{slog.LevelInfo, "info"},
		{slog.LevelWarn, "warn"},
		{slog.LevelError, "error"},
		{slog.LevelError + 4, "error"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		plugins.NewLogger(&buf, slog.LevelDebug-8).Log(t.Context(), tt.level, "loaded model", "model", "/m.bin")
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("level %v: %v in %q", tt.level, err, buf.String())
		}
		if line["@level"] != tt.want || line["@message"] != "loaded model" || line["model"] != "/m.bin" {
			t.Errorf("level %v: logged %v; want @level %q, @message, model", tt.level, line, tt.want)
		}
		ts, _ := line["@timestamp"].(string)
		if _, err := time.Parse("2006-01-02T15:04:05.000000Z07:00", ts); err != nil {
			t.Errorf("level %v: @timestamp: %v", tt.level, err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := line[k]; ok {
				t.Errorf("level %v: slog key %q left in %v", tt.level, k, line)
			}
		}
	}
}
