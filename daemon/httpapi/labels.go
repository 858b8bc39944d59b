package httpapi

import (
	"strings"
	"unicode/utf8"
)

// Bounds on a lease request's labels: every event and monitor frame that
// carries the lease carries them, so their size is bounded at the API.
const (
	maxLabels     = 32
	maxLabelKey   = 128
	maxLabelValue = 1024
	maxLabelBytes = 4096 // keys and values together
)

// checkLabels refuses labels over the bounds (400 naming the bound), empty
// or non-UTF-8 keys, and keys starting with "wsched.", the daemon's own.
func checkLabels(labels map[string]string) error {
	if len(labels) > maxLabels {
		return badRequest("invalid_field", "field labels: %d labels; at most %d are allowed", len(labels), maxLabels)
	}
	total := 0
	for k, v := range labels {
		switch {
		case k == "" || !utf8.ValidString(k) || !utf8.ValidString(v):
			return badRequest("invalid_field", "field labels: %q: want a non-empty UTF-8 key and a UTF-8 value", k)
		case len(k) > maxLabelKey:
			return badRequest("invalid_field", "field labels: key %.32q… is %d bytes; at most %d are allowed", k, len(k), maxLabelKey)
		case len(v) > maxLabelValue:
			return badRequest("invalid_field", "field labels: the value of %q is %d bytes; at most %d are allowed", k, len(v), maxLabelValue)
		case strings.HasPrefix(k, "wsched."):
			return badRequest("invalid_field", "field labels: %q: labels starting with \"wsched.\" are the daemon's own", k)
		}
		total += len(k) + len(v)
	}
	if total > maxLabelBytes {
		return badRequest("invalid_field", "field labels: %d bytes of keys and values; at most %d are allowed", total, maxLabelBytes)
	}
	return nil
}
