package host

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogAdapter(t *testing.T) {
	var buf syncBuffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("backend", "x")
	root := newHCLog(base)
	named := root.Named("wsched-backend-x")
	tests := []struct {
		log   hclog.Logger
		level hclog.Level
		msg   string
		args  []any
		want  string // "" when nothing may be written
	}{
		{named, hclog.Info, "loaded", []any{"model", "m", "timestamp", "2026-01-01"}, `level=INFO msg=loaded backend=x logger=wsched-backend-x model=m`},
		{named, hclog.Error, "boom", nil, `level=ERROR msg=boom backend=x logger=wsched-backend-x`},
		{named, hclog.Trace, "deep", nil, ""},
		{root, hclog.Info, "plugin process exited", []any{"id", 7}, `level=DEBUG msg="plugin process exited" backend=x id=7`},
		{root, hclog.Warn, "odd", []any{"k"}, `level=WARN msg=odd backend=x !BADKEY=k`},
		{root.With("lease", "l-1"), hclog.Debug, "with", nil, `level=DEBUG msg=with backend=x lease=l-1`},
	}
	for _, tt := range tests {
		buf.Reset()
		tt.log.Log(tt.level, tt.msg, tt.args...)
		got := buf.String()
		if tt.want == "" {
			if got != "" {
				t.Errorf("%s: wrote %q, want nothing", tt.msg, got)
			}
			continue
		}
		if _, rest, _ := strings.Cut(strings.TrimSpace(got), " "); rest != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.msg, rest, tt.want)
		}
	}
	if root.GetLevel() != hclog.Debug || !root.IsDebug() || root.IsTrace() {
		t.Errorf("level = %v, want Debug", root.GetLevel())
	}
	if named.Name() != "wsched-backend-x" || named.Named("y").Name() != "wsched-backend-x.y" {
		t.Errorf("names: %q, %q", named.Name(), named.Named("y").Name())
	}
	buf.Reset()
	root.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}).Print("std")
	if !strings.Contains(buf.String(), "level=WARN msg=std") {
		t.Errorf("standard logger wrote %q", buf.String())
	}
}

func TestLineWriter(t *testing.T) {
	var buf syncBuffer
	w := &lineWriter{log: slog.New(slog.NewTextHandler(&buf, nil)), stream: "stderr"}
	for _, p := range []string{"one\ntw", "o\r\n\n", "three"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if strings.Count(out, "stream=stderr") != 2 || !strings.Contains(out, "msg=one") || !strings.Contains(out, "msg=two") || strings.Contains(out, "three") {
		t.Errorf("lines logged:\n%s", out)
	}
}
