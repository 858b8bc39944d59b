package runner

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
	"github.com/wsched/wsched/plugins/whisper/describe"
)

// TestLoadRequestOptions: a model loads with its backend's option defaults
// under its entry's options; a job's language wins for a backend whose
// language option is a job option (an instance of its own: the host keys
// instances by Extra), and is not sent to one without it.
func TestLoadRequestOptions(t *testing.T) {
	sherpa, wh := modeldir.Descriptor(), describe.Descriptor()
	sv := models.Model{Name: "sv", Backend: sherpa.Name, Path: "/m/sv", Descriptor: sherpa, Options: map[string]string{"language": "zh", "itn": "false"}}
	r := &Runner{}
	for _, tt := range []struct {
		m    models.Model
		lang string
		want map[string]string
		fa   bool
	}{
		{sv, "", map[string]string{"language": "zh", "itn": "false"}, false},
		{sv, "en", map[string]string{"language": "en", "itn": "false"}, false},
		{models.Model{Name: "sv2", Backend: sherpa.Name, Path: "/m/sv2", Descriptor: sherpa}, "", nil, false},
		{models.Model{Name: "tiny", Backend: wh.Name, Path: "/m/tiny.bin", Descriptor: wh}, "en", map[string]string{"flash_attention": "true"}, true},
		{models.Model{Name: "tiny-nofa", Backend: wh.Name, Path: "/m/tiny.bin", Descriptor: wh, Options: map[string]string{"flash_attention": "false"}}, "", map[string]string{"flash_attention": "false"}, false},
		{models.Model{Name: "x", Backend: "x", Path: "/m/x", Descriptor: descriptor.Descriptor{Name: "x"}}, "en", nil, false},
		{models.Model{Name: "x8", Backend: "x", Path: "/m/x", Descriptor: descriptor.Descriptor{Name: "x"}, MaxStreams: 8}, "", nil, false},
	} {
		job := jobs.Job{Spec: jobs.Spec{Model: tt.m.Name, Language: tt.lang}}
		got := r.loadRequest(tt.m, job)
		tt.want = maps.Clone(tt.want)
		if tt.want == nil {
			tt.want = map[string]string{}
		}
		tt.want[plugins.ExtraMaxStreams] = strconv.Itoa(tt.m.Streams()) // always forwarded
		if !maps.Equal(got.Extra, tt.want) || got.FlashAttention != tt.fa {
			t.Errorf("%s, job language %q: Extra %v fa %v, want %v fa %v", tt.m.Name, tt.lang, got.Extra, got.FlashAttention, tt.want, tt.fa)
		}
	}
}

// TestJobOptionsChecked: a job's value for a Job option of its backend is
// checked by the option's type and named by its field.
func TestJobOptionsChecked(t *testing.T) {
	sherpa := modeldir.Descriptor()
	m := models.Model{Name: "sv", Backend: sherpa.Name, Path: "/m/sv", Descriptor: sherpa}
	if err := checkJobOptions(m, jobs.Job{Spec: jobs.Spec{Language: "yue"}}); err != nil {
		t.Errorf("language yue: %v", err)
	}
	err := checkJobOptions(m, jobs.Job{Spec: jobs.Spec{Language: "de"}})
	if !errors.Is(err, jobs.ErrBadInput) || !strings.Contains(err.Error(), `field language: "de" is not allowed: want one of auto, zh`) {
		t.Errorf("language de: %v", err)
	}
	wh := describe.Descriptor()
	if err := checkJobOptions(models.Model{Name: "tiny", Descriptor: wh}, jobs.Job{Spec: jobs.Spec{Language: "de"}}); err != nil {
		t.Errorf("whisper.cpp takes the language per job, not as an option: %v", err)
	}
}
