package host

import (
	"errors"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
)

// TestRescanFindsDroppedInBackends: the descriptor set is what the plugin
// directories hold at the last rescan; a backend dropped in since is found
// by the next Rescan (SIGHUP), or by Describe when a lookup misses it. A
// backend that sends no descriptor is described by its Info.
func TestRescanFindsDroppedInBackends(t *testing.T) {
	dir := t.TempDir()
	h := New(Options{Config: config.Backends{PluginDir: dir, StartTimeout: config.Defaults().Backends.StartTimeout}})
	set, err := h.Descriptors(t.Context())
	if err != nil || set.Names() != "none" {
		t.Fatalf("empty directory: %s, %v", set.Names(), err)
	}
	installFake(t, dir, "wsched-backend-fake", 0o755)
	if set, _ = h.Descriptors(t.Context()); set.Names() != "none" {
		t.Errorf("the set changed without a rescan: %s", set.Names())
	}
	d, err := h.Describe(t.Context(), "fake")
	if err != nil || d.Name != "fake" || d.Plugin != "fake" || !d.VAD || d.Sized() {
		t.Errorf("Describe(fake) = %+v, %v", d, err)
	}
	if set, _ = h.Descriptors(t.Context()); set.Names() != "fake" {
		t.Errorf("after Describe's rescan: %s", set.Names())
	}
	if _, err := h.Describe(t.Context(), "nope"); !errors.Is(err, ErrUnknownBackend) || !errors.Is(err, descriptor.ErrUnknownBackend) {
		t.Errorf("Describe(nope) = %v", err)
	}
	set, err = Discover(t.Context(), config.Backends{PluginDir: dir, StartTimeout: config.Defaults().Backends.StartTimeout})
	if err != nil || set.Names() != "fake" {
		t.Errorf("Discover: %s, %v", set.Names(), err)
	}
}
