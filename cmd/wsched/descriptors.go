package main

import (
	"context"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/execbackend"
	"github.com/wsched/wsched/plugins/host"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
	whisperdesc "github.com/wsched/wsched/plugins/whisper/describe"
)

// backendSet is what the CLI lists and sizes models with when it reads them
// itself: the descriptors of the backends in the plugin directories, and,
// for the in-tree backends not installed there, their built-in ones (so
// `wsched models` and `wsched estimate` work on a machine without them).
func backendSet(ctx context.Context, cfg config.Backends) descriptor.Set {
	found, _ := host.Discover(ctx, cfg)
	return descriptor.NewSet(append(found.All(), inTree()...)...)
}

// inTree are the descriptors of the backends built from this repository.
func inTree() []descriptor.Descriptor {
	return []descriptor.Descriptor{whisperdesc.Descriptor(), modeldir.Descriptor(), execbackend.Descriptor()}
}
