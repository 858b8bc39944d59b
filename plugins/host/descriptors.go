package host

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
)

// descriptors is the host's current set of backend descriptors, replaced
// whole by Rescan.
type descriptors struct {
	mu  sync.Mutex
	set descriptor.Set
	ok  bool // set has been built once
}

// describe is the descriptor of a discovered binary: its own, or, for a
// backend that sends none, one made of its Info (name, formats, devices).
// Plugin is always the binary's NAME.
func describe(b Binary, info plugins.Info) descriptor.Descriptor {
	d := info.Descriptor
	if d.IsZero() { // it may do VAD: it gets the request's VAD settings and decides
		d = descriptor.Descriptor{Name: b.Name, Formats: info.ModelFormats, Devices: info.Devices, VAD: true}
	}
	d.Plugin = b.Name
	return d
}

// Rescan discovers the backends in the plugin directories again, asks each
// new or changed binary for its Info, and replaces the descriptor set
// (the daemon calls it at start and on SIGHUP). A binary whose Info probe
// fails is left out (and logged).
func (h *Host) Rescan(ctx context.Context) (descriptor.Set, error) {
	found, _ := h.scan()
	var ds []descriptor.Descriptor
	for _, b := range found {
		info, failed := h.infoOf(ctx, b)
		if err := ctx.Err(); err != nil {
			return descriptor.Set{}, fmt.Errorf("host: rescan: %w", err)
		}
		if failed == "" {
			ds = append(ds, describe(b, info))
		}
	}
	set := descriptor.NewSet(ds...)
	h.descs.mu.Lock()
	h.descs.set, h.descs.ok = set, true
	h.descs.mu.Unlock()
	h.log.Info("backends discovered", "backends", set.Names(), "dirs", h.dirs)
	return set, nil
}

// Descriptors returns the descriptor set of the last Rescan, running one
// first if none has run.
func (h *Host) Descriptors(ctx context.Context) (descriptor.Set, error) {
	h.descs.mu.Lock()
	set, ok := h.descs.set, h.descs.ok
	h.descs.mu.Unlock()
	if ok {
		return set, nil
	}
	return h.Rescan(ctx)
}

// Describe looks up the backend called name: in the current set, then,
// when it is not there (a binary dropped in since), after a rescan.
func (h *Host) Describe(ctx context.Context, name string) (descriptor.Descriptor, error) {
	set, err := h.Descriptors(ctx)
	if err != nil {
		return descriptor.Descriptor{}, err
	}
	d, err := set.Lookup(name)
	if errors.Is(err, descriptor.ErrUnknownBackend) {
		if set, err = h.Rescan(ctx); err == nil {
			d, err = set.Lookup(name)
		}
	}
	if err != nil {
		return descriptor.Descriptor{}, fmt.Errorf("host: describe: %w: %w", ErrUnknownBackend, err)
	}
	return d, nil
}

// Discover builds the descriptor set of the backends in cfg's plugin
// directories without running a Host: each binary is started once for its
// Info (CUDA_VISIBLE_DEVICES=""). The CLI uses it where no daemon answers.
func Discover(ctx context.Context, cfg config.Backends) (descriptor.Set, error) {
	return New(Options{Config: cfg}).Rescan(ctx)
}
