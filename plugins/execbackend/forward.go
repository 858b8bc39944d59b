package execbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wsched/wsched/plugins"
)

// maxAnswer bounds an app's answer.
const maxAnswer = 64 << 20

// Transcribe forwards the audio file to the app and maps its answer. An app
// that died, or does not answer, fails the call with plugins.ErrUnavailable
// (the host restarts the backend, and with it the app, under the same
// lease); 400/413/415/422 answers are plugins.ErrBadAudio; an answer saying
// "out of memory" is plugins.ErrOutOfMemory.
//
// Up to the app's max_streams calls are forwarded at once; a further call
// waits for a place (or its ctx).
func (b *Backend) Transcribe(ctx context.Context, req plugins.TranscribeRequest, emit func(plugins.Event) error) (plugins.Result, error) {
	a, streams, err := b.runningStreams()
	if err != nil {
		return plugins.Result{}, err
	}
	select {
	case streams <- struct{}{}:
		defer func() { <-streams }()
	case <-ctx.Done():
		return plugins.Result{}, fmt.Errorf("exec backend: app %q: waiting for a stream: %w", a.s.Name, ctx.Err())
	}
	if req.VAD || !req.VADParams.IsZero() {
		return plugins.Result{}, fmt.Errorf("exec backend: app %q: %w: voice activity detection is not available: the app gets the audio as it is (submit without vad)", a.s.Name, plugins.ErrBadRequest)
	}
	if req.Translate && a.s.Protocol != ProtocolOpenAI {
		return plugins.Result{}, fmt.Errorf("exec backend: app %q: %w: translation needs protocol %q", a.s.Name, plugins.ErrBadRequest, ProtocolOpenAI)
	}
	if _, err := os.Stat(req.AudioPath); err != nil {
		return plugins.Result{}, fmt.Errorf("exec backend: %w: %w", plugins.ErrBadAudio, err)
	}
	body, err := b.post(ctx, a, req)
	if err != nil {
		return plugins.Result{}, err
	}
	res, err := a.mapAnswer(body)
	if err != nil {
		return plugins.Result{}, fmt.Errorf("exec backend: %s: %w", a.describe(), err)
	}
	fillTimes(&res, req.AudioPath)
	if req.Language != "" && res.Language == "" {
		res.Language = req.Language
	}
	if err := emit(plugins.ProgressEvent(100)); err != nil {
		return plugins.Result{}, err
	}
	return res, nil
}

// post sends the request and returns the 2xx answer's body. The body has
// a Content-Length (the audio's size is known): apps built on a plain HTTP
// server read that many bytes and do not decode a chunked body.
func (b *Backend) post(ctx context.Context, a *app, req plugins.TranscribeRequest) ([]byte, error) {
	route := a.s.Path
	if req.Translate {
		route = strings.Replace(route, "/transcriptions", "/translations", 1)
	}
	body, contentType, size, err := formBody(a.s, req)
	if err != nil {
		return nil, fmt.Errorf("exec backend: %w: %w", plugins.ErrBadAudio, err)
	}
	defer body.Close()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+route, body)
	if err != nil {
		return nil, fmt.Errorf("exec backend: %w", err)
	}
	hreq.ContentLength = size
	hreq.Header.Set("Content-Type", contentType)
	resp, err := b.client.Do(hreq)
	if err != nil {
		return nil, a.callFailed(ctx, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, a.callFailed(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, answerError(a, resp.Status, resp.StatusCode, answer)
	}
	return answer, nil
}

// callFailed classifies a failed call: cancelled, or the app is gone or
// does not answer (plugins.ErrUnavailable).
func (a *app) callFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("exec backend: %w", ctx.Err())
	}
	select { // a reset connection is usually the first sign of a dead app
	case <-a.done:
	case <-time.After(time.Second):
	}
	if a.exited() {
		return fmt.Errorf("exec backend: %w: %s", plugins.ErrUnavailable, a.exitNote())
	}
	return fmt.Errorf("exec backend: %w: %s did not answer: %w", plugins.ErrUnavailable, a.describe(), err)
}

// answerError maps a non-2xx answer.
func answerError(a *app, status string, code int, body []byte) error {
	msg := strings.TrimSpace(string(body))
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	var kind error
	switch {
	case strings.Contains(strings.ToLower(msg), "out of memory"):
		kind = plugins.ErrOutOfMemory
	case code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge || code == http.StatusUnsupportedMediaType || code == http.StatusUnprocessableEntity:
		kind = plugins.ErrBadAudio
	case code == http.StatusServiceUnavailable:
		kind = plugins.ErrUnavailable
	default:
		return fmt.Errorf("exec backend: %s answered %s: %s", a.describe(), status, msg)
	}
	return fmt.Errorf("exec backend: %w: %s answered %s: %s", kind, a.describe(), status, msg)
}

// formBody returns the multipart body — the fields the protocol sends, then
// the audio — as the form's head, the file and its tail, with its content
// type and exact length.
func formBody(s Settings, req plugins.TranscribeRequest) (io.ReadCloser, string, int64, error) {
	f, err := os.Open(req.AudioPath)
	if err != nil {
		return nil, "", 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", 0, err
	}
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if err := writeFields(mw, s, req); err != nil {
		f.Close()
		return nil, "", 0, err
	}
	tail := "\r\n--" + mw.Boundary() + "--\r\n" // what mw.Close writes after the last part
	size := int64(head.Len()) + st.Size() + int64(len(tail))
	r := io.MultiReader(&head, io.NewSectionReader(f, 0, st.Size()), strings.NewReader(tail))
	return readCloser{r, f}, mw.FormDataContentType(), size, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// writeFields writes the fields the protocol sends and the audio part's
// header; the audio itself follows.
func writeFields(mw *multipart.Writer, s Settings, req plugins.TranscribeRequest) error {
	name := filepath.Base(req.AudioPath)
	lang := req.Language
	fields := map[string]string{}
	field := s.Field
	if s.Protocol == ProtocolOpenAI {
		field = "file"
		fields["model"], fields["response_format"] = s.Name, "verbose_json"
		fields["language"], fields["prompt"], fields["temperature"] = lang, req.InitialPrompt, req.Extra["temperature"]
	} else {
		if lang == "" {
			lang = "auto"
		}
		// SenseVoice's api.py reads keys (one name per file) and lang.
		fields["keys"], fields["lang"], fields["language"] = strings.TrimSuffix(name, filepath.Ext(name)), lang, lang
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if fields[k] == "" {
			continue
		}
		if err := mw.WriteField(k, fields[k]); err != nil {
			return err
		}
	}
	_, err := mw.CreateFormFile(field, name)
	return err
}

// mapAnswer reads the app's answer by protocol.
func (a *app) mapAnswer(body []byte) (plugins.Result, error) {
	if a.s.Protocol == ProtocolMultipart {
		p, err := ParseJSONPath(a.s.TextJSONPath)
		if err != nil {
			return plugins.Result{}, err
		}
		return MapAnswer(body, p)
	}
	return mapOpenAI(body)
}

// openAIAnswer is OpenAI's verbose_json (json is the same without segments).
type openAIAnswer struct {
	Text     *string `json:"text"`
	Language string  `json:"language"`
	Duration float64 `json:"duration"`
	Segments []any   `json:"segments"`
}

// mapOpenAI reads an OpenAI-style answer: verbose_json, json, or plain text.
func mapOpenAI(body []byte) (plugins.Result, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return plugins.Result{Text: string(trimmed)}, nil // response_format text
	}
	var ans openAIAnswer
	if err := json.Unmarshal(trimmed, &ans); err != nil {
		return plugins.Result{}, fmt.Errorf("answer is not OpenAI's JSON: %w", err)
	}
	if ans.Text == nil {
		return plugins.Result{}, errors.New("answer has no \"text\"")
	}
	res := plugins.Result{Text: strings.TrimSpace(*ans.Text), Language: normalizeLanguage(ans.Language)}
	if d, ok := seconds(json.Number(fmt.Sprint(ans.Duration))); ok {
		res.Duration = d
	}
	if len(ans.Segments) > 0 {
		segs, err := toResult(ans.Segments, JSONPath{"segments"})
		if err != nil {
			return plugins.Result{}, err
		}
		res.Segments = segs.Segments
	}
	return res, nil
}

// normalizeLanguage turns OpenAI's language names ("english") into codes
// where it knows them; codes pass through.
func normalizeLanguage(l string) string {
	l = strings.ToLower(strings.TrimSpace(l))
	if code, ok := map[string]string{"english": "en", "chinese": "zh", "japanese": "ja", "korean": "ko", "cantonese": "yue",
		"german": "de", "french": "fr", "spanish": "es", "russian": "ru"}[l]; ok {
		return code
	}
	return l
}

// fillTimes gives the result its duration (from a WAV header when the app
// did not say) and a segment covering the audio when the app sent text
// without timed segments.
func fillTimes(res *plugins.Result, audio string) {
	if res.Duration == 0 {
		res.Duration = wavDuration(audio)
	}
	if len(res.Segments) == 0 && res.Text != "" {
		res.Segments = []plugins.Segment{{End: res.Duration, Text: res.Text}}
	}
	if len(res.Segments) == 1 && res.Segments[0].End == 0 {
		res.Segments[0].End = res.Duration
	}
}
