package runner

import (
	"maps"
	"testing"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
)

// TestSherpaLoadRequest: a sherpa-onnx model loads with its entry's language
// and ITN, and a job's language wins (an instance of its own: the host keys
// instances by Extra); other backends get none of it.
func TestSherpaLoadRequest(t *testing.T) {
	off := false
	sv := models.Model{Name: "sv", Backend: models.SherpaOnnx, Path: "/m/sv", Entry: config.Model{Language: "zh", ITN: &off}}
	r := &Runner{}
	for _, tt := range []struct {
		m    models.Model
		lang string
		want map[string]string
	}{
		{sv, "", map[string]string{"language": "zh", "itn": "false"}},
		{sv, "en", map[string]string{"language": "en", "itn": "false"}},
		{models.Model{Name: "sv2", Backend: models.SherpaOnnx, Path: "/m/sv2"}, "", map[string]string{}},
		{models.Model{Name: "tiny", Backend: models.WhisperCpp, Path: "/m/tiny.bin"}, "en", nil},
	} {
		job := jobs.Job{Spec: jobs.Spec{Model: tt.m.Name, Language: tt.lang}}
		got := r.loadRequest(tt.m, job).Extra
		if !maps.Equal(got, tt.want) || (tt.want == nil) != (got == nil) {
			t.Errorf("%s, job language %q: Extra %v, want %v", tt.m.Name, tt.lang, got, tt.want)
		}
	}
}
