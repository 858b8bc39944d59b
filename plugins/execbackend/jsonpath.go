package execbackend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/plugins"
)

// errNoText is an answer without text where text_json_path points.
var errNoText = errors.New("no text at the configured JSON path")

// JSONPath is a parsed text_json_path: dot-separated object keys and array
// indexes, e.g. "result.0.text". A number indexes an array, or names a key
// of an object.
type JSONPath []string

// ParseJSONPath parses a text_json_path.
func ParseJSONPath(s string) (JSONPath, error) {
	if s == "" {
		return nil, fmt.Errorf("text_json_path is empty: want keys and indexes joined by dots, e.g. result.0.text")
	}
	parts := strings.Split(s, ".")
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("text_json_path %q has an empty element: want keys and indexes joined by dots, e.g. result.0.text", s)
		}
	}
	return JSONPath(parts), nil
}

func (p JSONPath) String() string { return strings.Join(p, ".") }

// Select returns the value at p in a decoded JSON document.
func (p JSONPath) Select(doc any) (any, error) {
	v := doc
	for i, k := range p {
		switch t := v.(type) {
		case map[string]any:
			next, ok := t[k]
			if !ok {
				return nil, fmt.Errorf("%w: %s: no key %q", errNoText, JSONPath(p[:i+1]), k)
			}
			v = next
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(t) {
				return nil, fmt.Errorf("%w: %s: index %q of an array of %d", errNoText, JSONPath(p[:i+1]), k, len(t))
			}
			v = t[n]
		default:
			return nil, fmt.Errorf("%w: %s: %s is %s, not an object or array", errNoText, JSONPath(p[:i+1]), JSONPath(p[:i]), kind(v))
		}
	}
	return v, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}

// MapAnswer reads an app's JSON answer: the value at p is the transcript,
// as a string, an array of strings (one segment each), or an array of
// objects with "text" and optionally "start" and "end" in seconds (or
// "timestamp": [start, end] in milliseconds, FunASR's shape).
func MapAnswer(body []byte, p JSONPath) (plugins.Result, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return plugins.Result{}, fmt.Errorf("answer is not JSON: %w", err)
	}
	v, err := p.Select(doc)
	if err != nil {
		return plugins.Result{}, err
	}
	return toResult(v, p)
}

func toResult(v any, p JSONPath) (plugins.Result, error) {
	switch t := v.(type) {
	case string:
		return plugins.Result{Text: strings.TrimSpace(t)}, nil
	case []any:
		var res plugins.Result
		var texts []string
		for i, e := range t {
			seg, err := toSegment(e)
			if err != nil {
				return plugins.Result{}, fmt.Errorf("%w: %s.%d: %w", errNoText, p, i, err)
			}
			seg.Index = len(res.Segments)
			res.Segments = append(res.Segments, seg)
			texts = append(texts, seg.Text)
		}
		res.Text = strings.TrimSpace(strings.Join(texts, " "))
		return res, nil
	}
	return plugins.Result{}, fmt.Errorf("%w: %s is %s, want a string or an array of segments", errNoText, p, kind(v))
}

func toSegment(e any) (plugins.Segment, error) {
	switch t := e.(type) {
	case string:
		return plugins.Segment{Text: strings.TrimSpace(t)}, nil
	case map[string]any:
		text, ok := t["text"].(string)
		if !ok {
			return plugins.Segment{}, fmt.Errorf("a segment without a \"text\" string")
		}
		seg := plugins.Segment{Text: strings.TrimSpace(text)}
		start, ok1 := seconds(t["start"])
		end, ok2 := seconds(t["end"])
		if ts, ok := t["timestamp"].([]any); !(ok1 && ok2) && ok && len(ts) == 2 {
			start, ok1 = millis(ts[0])
			end, ok2 = millis(ts[1])
		}
		if ok1 && ok2 && end >= start {
			seg.Start, seg.End = start, end
		}
		return seg, nil
	}
	return plugins.Segment{}, fmt.Errorf("a segment is %s, want a string or an object with \"text\"", kind(e))
}

// maxSeconds bounds times read from an answer (a day), so nothing overflows.
const maxSeconds = 24 * 3600

func seconds(v any) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || !(f >= 0 && f <= maxSeconds) { // NaN fails both
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

func millis(v any) (time.Duration, bool) {
	f, ok := number(v)
	if !ok || !(f >= 0 && f <= maxSeconds*1000) {
		return 0, false
	}
	return time.Duration(f * float64(time.Millisecond)), true
}

func number(v any) (float64, bool) {
	var f float64
	switch t := v.(type) {
	case json.Number:
		var err error
		if f, err = t.Float64(); err != nil {
			return 0, false
		}
	case float64:
		f = t
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}
