package runner

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/plugins"
)

// loadRequest is how a model is loaded for job; sizeJob estimates for the
// same. The VAD model is the job's (a file in [models] dir) when it asks for
// VAD with one, else the model entry's; the job's value of an option its
// backend marks Job (SenseVoice's language) goes over the entry's (the host
// keys instances by Extra, so each value gets an instance of its own).
func (r *Runner) loadRequest(m models.Model, job jobs.Job) plugins.LoadRequest {
	req := loadRequest(m)
	req.VADModelPath = m.Entry.VADModel
	if v := job.Spec.VADOptions; v.VADModel != "" && vadOn(m, job) {
		req.VADModelPath = filepath.Join(r.models.Dir, v.VADModel)
	}
	for name, v := range jobOptions(job) {
		if o, ok := m.Descriptor.Option(name); ok && o.Job && v != "" {
			if req.Extra == nil {
				req.Extra = map[string]string{}
			}
			req.Extra[name] = v
		}
	}
	return req
}

// checkJobOptions checks the job's values for its backend's Job options
// (SenseVoice's language): a value the backend does not take is the
// client's mistake, named by its field, before any memory is leased.
func checkJobOptions(m models.Model, job jobs.Job) error {
	for name, v := range jobOptions(job) {
		if o, ok := m.Descriptor.Option(name); ok && o.Job && v != "" {
			if err := o.CheckWire(v); err != nil {
				return jobs.Mark(fmt.Errorf("model %q (backend %s): field %s: %w", m.Name, m.Backend, name, err), jobs.ErrBadInput)
			}
		}
	}
	return nil
}

// jobOptions are a job's request fields an option can take its value from.
func jobOptions(job jobs.Job) map[string]string {
	return map[string]string{"language": job.Spec.Language}
}

// loadRequest is the part of a model's load request that does not depend
// on the job (the sizing uses it): the model's options, its backend's
// defaults under the entry's, in Extra; the options named like a typed
// field of the request (flash_attention, threads) fill that field too.
func loadRequest(m models.Model) plugins.LoadRequest {
	req := plugins.LoadRequest{ModelPath: m.Path, ModelName: m.Name, Extra: m.Descriptor.Resolve(m.Options)}
	if req.Extra == nil {
		req.Extra = map[string]string{}
	}
	req.Extra[plugins.ExtraMaxStreams] = strconv.Itoa(m.Streams()) // what the host sends it at once
	req.FlashAttention = req.Extra["flash_attention"] == "true"
	if n, err := strconv.Atoi(req.Extra["threads"]); err == nil {
		req.Threads = n
	}
	if len(req.Extra) == 0 {
		req.Extra = nil
	}
	return req
}

// vadOn says whether job runs with VAD: its own choice, else its model's.
func vadOn(m models.Model, job jobs.Job) bool {
	if v := job.Spec.VAD; v != nil {
		return *v
	}
	return m.Entry.VAD
}

func transcribeRequest(m models.Model, job jobs.Job) plugins.TranscribeRequest {
	req := plugins.TranscribeRequest{AudioPath: job.Spec.AudioPath, Language: job.Spec.Language, Translate: job.Spec.Translate, InitialPrompt: job.Spec.Prompt}
	if job.Spec.Temperature > 0 {
		req.Extra = map[string]string{"temperature": strconv.FormatFloat(job.Spec.Temperature, 'f', -1, 64)}
	}
	if req.VAD = vadOn(m, job); req.VAD {
		req.VADParams = vadParams(m.Entry, job.Spec.VADOptions)
	}
	return req
}

// vadParams are the entry's VAD settings with the job's non-zero ones over
// them.
func vadParams(e config.Model, o jobs.VADOptions) plugins.VADParams {
	p := plugins.VADParams{Threshold: e.VADThreshold, MinSpeech: e.VADMinSpeech.D(), MinSilence: e.VADMinSilence.D(),
		MaxSpeech: e.VADMaxSpeech.D(), SpeechPad: e.VADSpeechPadding.D()}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	if o.VADThreshold > 0 {
		p.Threshold = o.VADThreshold
	}
	if o.VADMinSpeechMS > 0 {
		p.MinSpeech = ms(o.VADMinSpeechMS)
	}
	if o.VADMinSilenceMS > 0 {
		p.MinSilence = ms(o.VADMinSilenceMS)
	}
	if o.VADMaxSpeechS > 0 {
		p.MaxSpeech = time.Duration(o.VADMaxSpeechS * float64(time.Second))
	}
	if o.VADSpeechPadMS > 0 {
		p.SpeechPad = ms(o.VADSpeechPadMS)
	}
	return p
}
