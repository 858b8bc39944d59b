package models

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
)

// TestModelStreams (issue 26): a model's streams per instance are its
// entry's max_streams, else its backend's default, at least 1.
func TestModelStreams(t *testing.T) {
	dir := t.TempDir()
	a := write(t, filepath.Join(dir, "a"), "x")
	backends := descriptor.NewSet(
		descriptor.Descriptor{Name: "four", Plugin: "four", MaxStreams: 4},
		descriptor.Descriptor{Name: "one", Plugin: "one"},
	)
	reg, err := Load(context.Background(), config.Models{Entries: []config.Model{
		{Name: "default4", Backend: "four", Path: a},
		{Name: "set2", Backend: "four", Path: a, MaxStreams: 2},
		{Name: "default1", Backend: "one", Path: a},
		{Name: "set8", Backend: "one", Path: a, MaxStreams: 8},
	}}, backends)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"default4": 4, "set2": 2, "default1": 1, "set8": 8} {
		m, err := reg.Lookup(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := m.Streams(); got != want {
			t.Errorf("%s: Streams() = %d, want %d", name, got, want)
		}
	}
}
