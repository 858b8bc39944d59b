package execbackend

import "github.com/wsched/wsched/plugins/descriptor"

// reservedEnv are variables the backend sets itself: the lease's device
// pinning and the app's port. An entry's env may not set them.
var reservedEnv = []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SENSEVOICE_DEVICE", "SENSEVOICE_PORT",
	"SENSEVOICE_HOST", "PORT", "WSCHED_*"}

// Descriptor is what the exec backend tells the daemon: its models are
// [[models.model]] entries naming an app (dir, command), never files in
// models_dir; no estimator profile knows an app, so entries set memory.
// An app takes one transcription at a time (MaxStreams 1) unless its entry
// declares more with the [[models.model]] key max_streams, which the host
// reads and forwards as LoadRequest.Extra["max_streams"]: the backend then
// forwards that many calls to the app at once.
func Descriptor() descriptor.Descriptor {
	return descriptor.Descriptor{
		Name:    Name,
		Formats: []string{descriptor.FormatApp},
		PathKey: "dir",
		// One transcription at a time unless the app declares more.
		MaxStreams: 1,
		Devices:    []string{descriptor.DeviceCPU, descriptor.DeviceCUDA},
		Options: []descriptor.Option{
			{Name: ExtraCommand, Type: descriptor.TypeList, Required: true,
				Help: `the command that starts the app, e.g. ["python3", "main.py"]`},
			{Name: ExtraEnv, Type: descriptor.TypeTable, Reserved: reservedEnv, Help: "variables added to the lease's environment"},
			{Name: ExtraHealth, Type: descriptor.TypeRoute, Default: DefaultHealth, Help: "the route that answers 2xx once the app serves"},
			{Name: ExtraProtocol, Type: descriptor.TypeEnum, Values: []string{ProtocolOpenAI, ProtocolMultipart},
				Default: ProtocolOpenAI, Help: "how audio is posted to the app"},
			{Name: ExtraPath, Type: descriptor.TypeRoute, Help: "the app's transcription route"},
			{Name: ExtraField, Type: descriptor.TypeString, Help: "protocol multipart: the form field of the file"},
			{Name: ExtraTextJSONPath, Type: descriptor.TypeString, Help: "protocol multipart: where the text is in the JSON answer"},
			{Name: ExtraStartTimeout, Type: descriptor.TypeDuration, Help: "how long the app may take to answer its health route (default 2m)"},
		},
	}
}
