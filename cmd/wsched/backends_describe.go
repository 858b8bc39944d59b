package main

import (
	"fmt"
	"strings"

	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/plugins/descriptor"
)

// describeNotes are the lines `wsched backends` prints under a backend:
// what its descriptor says (the backend name models use, sizing, layouts,
// CPU-only builds, options).
func describeNotes(d descriptor.Descriptor) []string {
	sizing := "memory set per model"
	switch {
	case d.Profile != "":
		sizing = "sized by the estimator's " + d.Profile + " profile"
	case d.Memory != nil:
		sizing = fmt.Sprintf("sized as %s + %g × the model's size", units.FormatBytes(d.Memory.BaseBytes), d.Memory.PerModelByte)
	}
	notes := []string{fmt.Sprintf("serves backend %q; %s", d.Name, sizing)}
	if l := layouts(d.Layouts); l != "" {
		notes = append(notes, "models_dir: "+l)
	}
	if d.CPUOnly() {
		notes = append(notes, "cpu only: this build cannot use CUDA; its instances run on the CPU and lease no GPU memory")
	}
	for _, o := range d.Options {
		typ := string(o.Type)
		if len(o.Values) > 0 {
			typ = strings.Join(o.Values, "|")
		}
		line := fmt.Sprintf("option %s (%s", o.Name, typ)
		if o.Default != "" {
			line += ", default " + o.Default
		}
		if o.Required {
			line += ", required"
		}
		notes = append(notes, line+"): "+o.Help)
	}
	return notes
}

// layouts says how a backend's models are found in models_dir.
func layouts(ls []descriptor.Layout) string {
	var out []string
	for _, l := range ls {
		switch l.Kind {
		case descriptor.LayoutFile:
			out = append(out, l.Prefix+"NAME"+l.Suffix)
		case descriptor.LayoutDir:
			var req []string
			for _, alts := range l.Requires {
				req = append(req, strings.Join(alts, "|"))
			}
			out = append(out, "NAME/{"+strings.Join(req, ", ")+"}")
		}
	}
	return strings.Join(out, "; ")
}
