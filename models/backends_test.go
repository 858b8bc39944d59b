package models

import (
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/execbackend"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
	"github.com/wsched/wsched/plugins/whisper/describe"
)

// The in-tree backends, as the daemon would discover them.
var testBackends = descriptor.NewSet(describe.Descriptor(), modeldir.Descriptor(), execbackend.Descriptor())

// Their names, for the tests.
const (
	WhisperCpp = describe.Name
	SherpaOnnx = modeldir.Name
	execName   = execbackend.Name
)
