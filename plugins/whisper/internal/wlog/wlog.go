// Package wlog parses the log lines whisper.cpp prints while it loads a model and sets up its state
// (hyperparameters, context parameters, buffer sizes) into a Report.
//
// whisper.cpp prints sizes as "%7.2f MB" of size/1e6 (src/whisper.cpp: whisper_model_load,
// whisper_init_state), so one printed MB is 10^6 bytes and a printed figure is exact to ±5,000 bytes.
// The package has no cgo: a backend feeds it the lines it receives through whisper_log_set.
package wlog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// BytesPerMB is what whisper.cpp divides by before printing "MB".
const BytesPerMB = 1_000_000

var (
	// ErrNotMB means a value does not have the "<decimal> MB" form whisper.cpp prints for sizes.
	ErrNotMB = errors.New("not a whisper.cpp MB figure")
)

// Figure is one size whisper.cpp printed.
type Figure struct {
	// Printed is the value exactly as printed, e.g. "77.11 MB".
	Printed string `json:"printed"`
	// Bytes is Printed converted with BytesPerMB; the print rounds to 0.01 MB, so it is ±5,000 bytes.
	Bytes int64 `json:"bytes"`
}

// Report collects what whisper.cpp logged. Keys are the printed names, lower-cased, with runs of spaces,
// parentheses and dashes folded to one underscore: "kv self size", "compute buffer (conv)" and
// "CPU total size" become kv_self_size, compute_buffer_conv and cpu_total_size.
type Report struct {
	// Sizes holds every "name = <x> MB" line.
	Sizes map[string]Figure `json:"sizes"`
	// Values holds every other "name = value" line, value as printed (hparams, "flash attn", ...).
	Values map[string]string `json:"values"`
}

// NewReport returns an empty Report.
func NewReport() *Report {
	return &Report{Sizes: map[string]Figure{}, Values: map[string]string{}}
}

// Add parses one log line ("func: name = value") and records it. It reports whether the line had that
// form. A later line with the same name replaces the earlier one.
func (r *Report) Add(line string) bool {
	name, value, ok := split(line)
	if !ok {
		return false
	}
	if f, err := ParseMB(value); err == nil {
		r.Sizes[name] = f
		return true
	}
	r.Values[name] = value
	return true
}

// Int returns a Values entry that is a plain decimal integer (n_vocab, n_audio_ctx, ftype, ...).
func (r *Report) Int(name string) (int64, bool) {
	v, ok := r.Values[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// split takes "whisper_init_state: kv self size  =    6.29 MB" apart into ("kv_self_size", "6.29 MB").
func split(line string) (name, value string, ok bool) {
	line = strings.TrimSpace(line)
	colon := strings.Index(line, ": ")
	if colon <= 0 || strings.ContainsAny(line[:colon], " \t") {
		return "", "", false
	}
	rest := line[colon+2:]
	eq := strings.Index(rest, "=")
	if eq < 0 || strings.Contains(rest[:eq], ":") {
		return "", "", false
	}
	name = normalize(rest[:eq])
	value = strings.Join(strings.Fields(rest[eq+1:]), " ")
	if name == "" || value == "" {
		return "", "", false
	}
	return name, value, true
}

func normalize(s string) string {
	var b strings.Builder
	pendingSep := false
	for _, c := range strings.ToLower(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
			if pendingSep && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingSep = false
			b.WriteRune(c)
		default:
			pendingSep = true
		}
	}
	return b.String()
}

// ParseMB converts a printed "<decimal> MB" figure to bytes without floating point.
func ParseMB(value string) (Figure, error) {
	num, ok := strings.CutSuffix(value, " MB")
	if !ok {
		return Figure{}, fmt.Errorf("parse %q: %w", value, ErrNotMB)
	}
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || len(frac) > 6 || !digits(whole) || !digits(frac) || len(whole) > 12 {
		return Figure{}, fmt.Errorf("parse %q: %w", value, ErrNotMB)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return Figure{}, fmt.Errorf("parse %q: %w", value, ErrNotMB)
	}
	var f int64
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil {
			return Figure{}, fmt.Errorf("parse %q: %w", value, ErrNotMB)
		}
	}
	return Figure{Printed: value, Bytes: w*BytesPerMB + f}, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
