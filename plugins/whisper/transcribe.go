//go:build whisper

package whisper

import (
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"time"

	wcpp "github.com/ggerganov/whisper.cpp/bindings/go"

	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/internal/audio"
)

// Transcribe decodes the audio file (WAV natively, anything else through
// ffmpeg when it is installed) and runs whisper_full on it, emitting
// progress (0 to 100, 100 last) and each segment as whisper.cpp produces it.
// Cancelling ctx stops whisper.cpp at its next encoder or decoder step.
//
// Each call runs on a whisper_state of its own, allocated when the call
// starts and freed when it ends; up to max_streams calls run at once, in
// parallel, with the model's threads each. The Result's StreamMemory is
// that state's buffers as whisper.cpp logged them at whisper_init_state.
// A call with VAD runs on the context's default state instead, one at a
// time (whisper.cpp 1.9 runs VAD only there); its StreamMemory is the one
// measured at load.
//
// Decoding follows whisper.cpp's defaults unless req says otherwise: greedy
// with best_of 5 and temperature fallback. A window that falls back decodes
// with best_of decoders and whisper_full re-allocates the KV self cache at
// (best_of + 2) × its logged size, 7× by default, and keeps it so while the
// model stays loaded; beam search does the same with beam_size. Estimates
// for this backend should therefore pass best_of 5 (or the beam size) to the
// estimator, which reserves that growth.
func (b *Backend) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	fail := func(err error) (plugins.Result, error) {
		return plugins.Result{}, fmt.Errorf("whisper transcribe %s: %w", req.AudioPath, err)
	}
	if err := b.ready(); err != nil {
		return fail(err)
	}
	samples, err := b.decodeAudio(ctx, req.AudioPath)
	if err != nil {
		return fail(err)
	}
	if err := b.gate.Acquire(ctx, false); err != nil {
		return fail(err)
	}
	defer b.gate.Release(false)
	if err := b.ready(); err != nil { // unloaded or broken while the audio decoded
		return fail(err)
	}
	b.mu.Lock()
	m := b.model
	b.mu.Unlock()
	opts, err := m.decodeOptions(req)
	if err != nil {
		return fail(err)
	}
	res, err := b.onState(ctx, m, opts, samples, emit)
	if err != nil {
		return fail(err)
	}
	return res, nil
}

// onState runs the call on a state of its own, or on the context's default
// state for VAD; the caller holds a stream of the gate.
func (b *Backend) onState(ctx context.Context, m *model, o decodeOptions, samples []float32, emit func(plugins.Event) error) (plugins.Result, error) {
	if o.vad {
		b.vadMu.Lock()
		defer b.vadMu.Unlock()
		res, err := b.transcribe(ctx, m, defaultState(m.ctx), o, samples, emit)
		res.StreamMemory = m.stream
		return res, err
	}
	st, lines, err := b.newState(m)
	if err != nil {
		return plugins.Result{}, err
	}
	res, err := b.transcribe(ctx, m, st, o, samples, emit)
	if errors.Is(err, errTrapped) {
		return res, err // a parked thread may still use the state
	}
	if errors.Is(err, errStateLost) {
		b.states.Add(-1) // whisper.cpp freed it
	} else {
		b.freeState(st)
	}
	res.StreamMemory = streamReport(lines)
	return res, err
}

// ready fails when the backend is broken or has no model.
func (b *Backend) ready() error {
	if err := b.usable(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.model == nil {
		return plugins.ErrNotLoaded
	}
	return nil
}

func (b *Backend) decodeAudio(ctx context.Context, path string) ([]float32, error) {
	return audio.ForBackend(ctx, b.ffmpeg(), path)
}

// errStateLost: whisper_full_with_state freed the state itself (status -7,
// its KV cache could not be re-allocated).
var errStateLost = errors.New("whisper.cpp freed the state")

// transcribe runs whisper_full on st with the callbacks wired to a run.
func (b *Backend) transcribe(ctx context.Context, m *model, st state, o decodeOptions, samples []float32, emit func(plugins.Event) error) (plugins.Result, error) {
	r := &run{ctx: ctx, st: st, emit: emit, flag: newAbortFlag(), sent: -1}
	h := cgo.NewHandle(r)
	p, freeParams := o.params(m)
	p.setCallbacks(h, r.flag)
	stop := watchCancel(ctx, r.flag)
	var status int
	tag := b.newTag()
	lines, err := b.call(tag, func() { status = full(st, p, samples, tag) })
	stop()
	if err != nil {
		// Trapped: a parked or still running thread may use the handle, the
		// flag and the strings, so they stay allocated.
		return plugins.Result{}, err
	}
	h.Delete()
	r.flag.free()
	freeParams()
	if status == -7 { // the KV cache could not be re-allocated; the state is freed
		if st.st == nil { // the context's own: it now points to freed memory
			b.markBroken("whisper_full: " + fullError(status))
		}
		return plugins.Result{}, fmt.Errorf("%w: %w: whisper_full: %s", plugins.ErrOutOfMemory, errStateLost, lastError(lines))
	}
	if err := r.finish(status, lines); err != nil {
		return plugins.Result{}, err
	}
	lang := o.language
	if lang < 0 {
		lang = st.langID()
	}
	return plugins.Result{
		Language: wcpp.Whisper_lang_str(lang),
		Duration: time.Duration(len(samples)) * time.Second / audio.SampleRate,
		Text:     strings.TrimSpace(r.text.String()),
		Segments: r.segments,
	}, nil
}

// watchCancel raises flag when ctx is done, until stop returns; after that
// nothing touches flag (context.AfterFunc's stop does not wait for a
// running func, and the flag is freed right after).
func watchCancel(ctx context.Context, flag abortFlag) (stop func()) {
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			flag.set()
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

func (b *Backend) markBroken(why string) {
	b.mu.Lock()
	b.broken = why
	b.mu.Unlock()
	b.log.Error("whisper.cpp state lost; backend disabled until restarted", "reason", why)
}

// errFull is a whisper_full failure that is not the caller's doing.
var errFull = errors.New("whisper_full failed")

// run is one whisper_full call as its callbacks see it. Only the goroutine
// inside whisper_full touches it until the call returns.
type run struct {
	ctx      context.Context
	st       state
	emit     func(plugins.Event) error
	flag     abortFlag
	sent     int // last progress emitted; -1 before the first
	segments []plugins.Segment
	text     strings.Builder
	err      error // first emit error: the host went away
}

// onSegments reads the n segments whisper.cpp just added and emits them.
// Times come in 10 ms units.
func (r *run) onSegments(n int) {
	total := r.st.nSegments()
	for i := max(0, total-n); i < total; i++ {
		raw := r.st.segmentText(i)
		t0, t1 := r.st.segmentTimes(i)
		seg := plugins.Segment{
			Index: i,
			Start: time.Duration(t0) * 10 * time.Millisecond,
			End:   time.Duration(t1) * 10 * time.Millisecond,
			Text:  strings.TrimSpace(raw),
		}
		r.text.WriteString(raw)
		r.segments = append(r.segments, seg)
		r.send(plugins.SegmentEvent(seg))
	}
}

// onProgress emits whisper.cpp's progress clamped to 0..100 (it reports up
// to ~270 on the last window), each value once and only rising.
func (r *run) onProgress(p int) {
	p = min(max(p, 0), 100)
	if p <= r.sent {
		return
	}
	r.sent = p
	r.send(plugins.ProgressEvent(float64(p)))
}

// send emits ev; a failed emit or a cancelled ctx raises the abort flag.
func (r *run) send(ev plugins.Event) {
	if r.err != nil {
		return
	}
	if r.emit != nil {
		r.err = r.emit(ev)
	}
	if r.err != nil || r.ctx.Err() != nil {
		r.flag.set()
	}
}

// finish turns whisper_full's status into the call's error and sends the
// final 100 %. An abort shows as a failed encode or decode, or (when it hit
// between windows) as success: the context decides.
func (r *run) finish(status int, lines []logLine) error {
	switch {
	case r.err != nil:
		return r.err
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case status == -4:
		return fmt.Errorf("%w: whisper_full: %s", plugins.ErrBadRequest, fullError(status))
	case status != 0:
		return fmt.Errorf("%w: %s: %s", errFull, fullError(status), lastError(lines))
	}
	if r.sent < 100 {
		r.sent = 100
		r.send(plugins.ProgressEvent(100))
	}
	return r.err
}
