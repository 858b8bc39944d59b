// Package execbackend runs an existing transcription server (a Python app
// such as a SenseVoice or FunASR service) as a wsched backend: Load starts
// the app's command under the instance's lease on a free loopback port and
// waits for its health route, Transcribe forwards each file to it over HTTP
// and maps its JSON answer to segments and text, Unload stops the app's whole
// process group. cmd/wsched-backend-exec serves it over go-plugin.
package execbackend

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/plugins"
)

// Name is the backend's name: the binary is wsched-backend-exec.
const Name = "exec"

// Protocols the backend speaks to an app.
const (
	ProtocolOpenAI    = "openai"    // multipart to /v1/audio/transcriptions, verbose_json answer
	ProtocolMultipart = "multipart" // the file as one form field, the text at a JSON path
)

// LoadRequest.Extra keys: a model entry's exec settings, as the daemon sends
// them (Settings.Extra writes them, ParseSettings reads them).
const (
	ExtraName         = "name"
	ExtraCommand      = "command" // JSON array
	ExtraEnv          = "env"     // JSON object
	ExtraHealth       = "health"
	ExtraProtocol     = "protocol"
	ExtraPath         = "path"
	ExtraField        = "field"
	ExtraTextJSONPath = "text_json_path"
	ExtraStartTimeout = "start_timeout"
	// ExtraMaxStreams is the concurrency the app takes: the entry's
	// max_streams as the host forwards it, how many transcriptions the
	// backend forwards to the app at once (default 1).
	ExtraMaxStreams = plugins.ExtraMaxStreams
)

// Defaults for the settings a model entry leaves out.
const (
	DefaultHealth          = "/health"
	DefaultOpenAIPath      = "/v1/audio/transcriptions"
	DefaultMultipartPath   = "/api/v1/asr" // SenseVoice's api.py
	DefaultField           = "files"
	DefaultTextJSONPath    = "result.0.text"
	DefaultStartTimeout    = 2 * time.Minute
	defaultStopGracePeriod = 5 * time.Second
)

// Settings say how to run and talk to one app.
type Settings struct {
	Name         string   // the model name, for messages
	Command      []string // argv
	Dir          string   // working directory (LoadRequest.ModelPath)
	Env          map[string]string
	Health       string // route answering 2xx once the app serves
	Protocol     string
	Path         string // transcription route
	Field        string // multipart: the file's form field
	TextJSONPath string // multipart: where the text is in the answer
	StartTimeout time.Duration
	MaxStreams   int // transcriptions forwarded at once, at least 1
}

// Extra encodes s (all but Dir, which travels as the model path) for a
// LoadRequest.
func (s Settings) Extra() map[string]string {
	cmd, _ := json.Marshal(s.Command)
	out := map[string]string{ExtraName: s.Name, ExtraCommand: string(cmd)}
	if len(s.Env) > 0 {
		env, _ := json.Marshal(s.Env)
		out[ExtraEnv] = string(env)
	}
	for k, v := range map[string]string{ExtraHealth: s.Health, ExtraProtocol: s.Protocol, ExtraPath: s.Path,
		ExtraField: s.Field, ExtraTextJSONPath: s.TextJSONPath} {
		if v != "" {
			out[k] = v
		}
	}
	if s.StartTimeout > 0 {
		out[ExtraStartTimeout] = s.StartTimeout.String()
	}
	if s.MaxStreams > 0 {
		out[ExtraMaxStreams] = strconv.Itoa(s.MaxStreams)
	}
	return out
}

// ParseSettings reads the settings of a LoadRequest and fills in defaults.
// Errors wrap plugins.ErrBadRequest.
func ParseSettings(req plugins.LoadRequest) (Settings, error) {
	x := req.Extra
	s := Settings{Name: cmp.Or(x[ExtraName], req.ModelName), Dir: req.ModelPath, Health: x[ExtraHealth], Protocol: x[ExtraProtocol],
		Path: x[ExtraPath], Field: x[ExtraField], TextJSONPath: x[ExtraTextJSONPath], StartTimeout: DefaultStartTimeout, MaxStreams: 1}
	if err := json.Unmarshal([]byte(x[ExtraCommand]), &s.Command); err != nil || len(s.Command) == 0 || s.Command[0] == "" {
		return s, fmt.Errorf("%w: %s=%q: want a JSON array naming the app's command", plugins.ErrBadRequest, ExtraCommand, x[ExtraCommand])
	}
	if v := x[ExtraEnv]; v != "" {
		if err := json.Unmarshal([]byte(v), &s.Env); err != nil {
			return s, fmt.Errorf("%w: %s: %w", plugins.ErrBadRequest, ExtraEnv, err)
		}
	}
	if v := x[ExtraStartTimeout]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("%w: %s=%q: want a duration above 0", plugins.ErrBadRequest, ExtraStartTimeout, v)
		}
		s.StartTimeout = d
	}
	if v := x[ExtraMaxStreams]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("%w: %s=%q: want a positive count", plugins.ErrBadRequest, ExtraMaxStreams, v)
		}
		s.MaxStreams = n
	}
	if s.Name == "" {
		s.Name = strings.Join(s.Command, " ")
	}
	return s.withDefaults()
}

func (s Settings) withDefaults() (Settings, error) {
	if s.Health == "" {
		s.Health = DefaultHealth
	}
	switch s.Protocol {
	case "", ProtocolOpenAI:
		s.Protocol = ProtocolOpenAI
		if s.Path == "" {
			s.Path = DefaultOpenAIPath
		}
	case ProtocolMultipart:
		if s.Path == "" {
			s.Path = DefaultMultipartPath
		}
		if s.Field == "" {
			s.Field = DefaultField
		}
		if s.TextJSONPath == "" {
			s.TextJSONPath = DefaultTextJSONPath
		}
		if _, err := ParseJSONPath(s.TextJSONPath); err != nil {
			return s, fmt.Errorf("%w: %s: %w", plugins.ErrBadRequest, ExtraTextJSONPath, err)
		}
	default:
		return s, fmt.Errorf("%w: %s=%q: want %s or %s", plugins.ErrBadRequest, ExtraProtocol, s.Protocol, ProtocolOpenAI, ProtocolMultipart)
	}
	for _, r := range []string{s.Health, s.Path} {
		if !strings.HasPrefix(r, "/") {
			return s, fmt.Errorf("%w: route %q: want a path starting with /", plugins.ErrBadRequest, r)
		}
	}
	return s, nil
}

// commandLine is the app's command for messages.
func (s Settings) commandLine() string { return strings.Join(s.Command, " ") }

// envList is the app's environment: base (the backend's own, which is the
// lease's), the entry's env, then the variables the backend owns
// (WSCHED_MAX_STREAMS tells the app the concurrency it declared).
func (s Settings) envList(base []string, device string, port int) []string {
	env := slices.Clone(base)
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	p := fmt.Sprint(port)
	return append(env, "SENSEVOICE_DEVICE="+device, "SENSEVOICE_HOST=127.0.0.1", "SENSEVOICE_PORT="+p, "PORT="+p,
		"WSCHED_MAX_STREAMS="+strconv.Itoa(max(s.MaxStreams, 1)))
}
