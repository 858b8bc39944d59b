// Package device parses and prints the device string with which users and
// requests name where work should run: "auto", "cuda", "cuda:N",
// "GPU-<uuid>" or "cpu". Parse is the one parser for WSCHED_DEVICE, the
// legacy SENSEVOICE_DEVICE, config values and API requests.
package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalid is returned (wrapped) for any string Parse does not accept.
var ErrInvalid = errors.New("invalid device")

// Allowed lists the accepted forms, for error messages and help text.
const Allowed = `auto, cuda, cuda:N, GPU-<uuid>, cpu`

// Kind says what a Spec selects.
type Kind int

// The kinds of device selection.
const (
	// Auto lets the placement policy choose a GPU (also "cuda").
	Auto Kind = iota
	// Index pins the GPU with the given NVML index.
	Index
	// UUID pins the GPU with the given UUID.
	UUID
	// CPU runs without a GPU.
	CPU
)

// Spec is a parsed device string. The zero value is Auto.
type Spec struct {
	Kind  Kind
	Index int    // valid when Kind == Index
	UUID  string // valid when Kind == UUID, e.g. "GPU-5a1c…"
}

// maxIndex bounds cuda:N; NVML enumerates far fewer devices than this.
const maxIndex = 1 << 16

// Parse reads a device string. Matching of the keywords is case-insensitive
// and surrounding space is ignored; an empty string means auto. UUIDs keep
// their case as NVML reports it ("GPU-" prefix, hex digits and dashes; MIG
// device UUIDs "MIG-…" are accepted too).
func Parse(s string) (Spec, error) {
	t := strings.TrimSpace(s)
	low := strings.ToLower(t)
	switch {
	case low == "" || low == "auto" || low == "cuda":
		return Spec{Kind: Auto}, nil
	case low == "cpu":
		return Spec{Kind: CPU}, nil
	case strings.HasPrefix(low, "cuda:"):
		return parseIndex(s, t[len("cuda:"):])
	case strings.HasPrefix(low, "gpu-") || strings.HasPrefix(low, "mig-"):
		return parseUUID(s, t)
	}
	return Spec{}, fmt.Errorf("%w %q: want one of %s", ErrInvalid, s, Allowed)
}

func parseIndex(orig, digits string) (Spec, error) {
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return Spec{}, fmt.Errorf("%w %q: cuda:N needs a GPU index N >= 0", ErrInvalid, orig)
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n >= maxIndex {
		return Spec{}, fmt.Errorf("%w %q: GPU index out of range", ErrInvalid, orig)
	}
	return Spec{Kind: Index, Index: n}, nil
}

func parseUUID(orig, t string) (Spec, error) {
	body := t[4:]
	if strings.HasPrefix(strings.ToLower(body), "gpu-") { // old MIG form MIG-GPU-<uuid>/gi/ci
		body = body[4:]
	}
	if len(body) < 8 || len(body) > 96 {
		return Spec{}, fmt.Errorf("%w %q: malformed GPU UUID", ErrInvalid, orig)
	}
	for _, r := range body {
		ok := r == '-' || r == '/' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
		if !ok {
			return Spec{}, fmt.Errorf("%w %q: malformed GPU UUID", ErrInvalid, orig)
		}
	}
	return Spec{Kind: UUID, UUID: t}, nil
}

// String prints the canonical form that Parse reads back.
func (s Spec) String() string {
	switch s.Kind {
	case Index:
		return "cuda:" + strconv.Itoa(s.Index)
	case UUID:
		return s.UUID
	case CPU:
		return "cpu"
	default:
		return "auto"
	}
}

// IsPinned reports whether the spec names one specific GPU.
func (s Spec) IsPinned() bool { return s.Kind == Index || s.Kind == UUID }

// MarshalText implements encoding.TextMarshaler.
func (s Spec) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Spec) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// FromEnv returns the device pin from an environment lookup function:
// WSCHED_DEVICE wins over the legacy SENSEVOICE_DEVICE. The second result is
// the name of the variable that was set ("" if neither was).
func FromEnv(lookup func(string) (string, bool)) (Spec, string, error) {
	for _, name := range []string{"WSCHED_DEVICE", "SENSEVOICE_DEVICE"} {
		if v, ok := lookup(name); ok && strings.TrimSpace(v) != "" {
			spec, err := Parse(v)
			if err != nil {
				return Spec{}, name, fmt.Errorf("%s: %w", name, err)
			}
			return spec, name, nil
		}
	}
	return Spec{Kind: Auto}, "", nil
}
