package descriptor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownBackend is matched by Set.Lookup's error for a name no
// descriptor has.
var ErrUnknownBackend = errors.New("no such backend")

// Set is the descriptors the daemon knows, looked up by backend name. The
// zero Set is empty. A Set is not changed after it is built: a rescan
// builds a new one.
type Set struct {
	byName map[string]Descriptor
}

// NewSet returns a set of ds; the first descriptor of a name wins (plugin
// directories are searched in order).
func NewSet(ds ...Descriptor) Set {
	s := Set{byName: map[string]Descriptor{}}
	for _, d := range ds {
		if _, ok := s.byName[d.Name]; !ok && d.Name != "" {
			s.byName[d.Name] = d
		}
	}
	return s
}

// Lookup returns the descriptor of the backend called name; the error
// (ErrUnknownBackend) names the known ones.
func (s Set) Lookup(name string) (Descriptor, error) {
	if d, ok := s.byName[name]; ok {
		return d, nil
	}
	return Descriptor{}, fmt.Errorf("backend %q (known: %s): %w", name, s.Names(), ErrUnknownBackend)
}

// All returns the descriptors sorted by name.
func (s Set) All() []Descriptor {
	out := make([]Descriptor, 0, len(s.byName))
	for _, d := range s.byName {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Descriptor) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Names lists the backend names, comma-separated ("none" when empty).
func (s Set) Names() string {
	var names []string
	for _, d := range s.All() {
		names = append(names, d.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ByProfile returns the descriptor sized with the estimator profile p.
func (s Set) ByProfile(p string) (Descriptor, bool) {
	for _, d := range s.All() {
		if d.Profile == p {
			return d, true
		}
	}
	return Descriptor{}, false
}
