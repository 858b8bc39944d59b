package descriptor

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/internal/confval"
)

// Type is an option's value type.
type Type string

// Option types. On the wire (plugins.LoadRequest.Extra) every value is a
// string: bools "true"/"false", numbers in Go syntax, durations as
// time.Duration strings, lists and tables as JSON.
const (
	TypeString   Type = "string"
	TypeBool     Type = "bool"
	TypeInt      Type = "int"
	TypeFloat    Type = "float"
	TypeDuration Type = "duration"
	TypeEnum     Type = "enum"     // one of Values
	TypeList     Type = "list"     // a list of strings
	TypeTable    Type = "table"    // string keys to string values
	TypeRoute    Type = "route"    // an HTTP route: a string starting with /
	TypeAbsPath  Type = "abs_path" // an absolute file path
)

// Option is one setting a model entry may give a backend.
type Option struct {
	Name    string   `json:"name"`
	Type    Type     `json:"type"`
	Default string   `json:"default,omitempty"` // as on the wire; "" = none
	Help    string   `json:"help,omitempty"`
	Values  []string `json:"values,omitempty"` // TypeEnum
	// Required options must be set in every entry.
	Required bool `json:"required,omitempty"`
	// Job marks an option a job's request field of the same name
	// overrides ("language"): the job's value is loaded with the model,
	// and instances are kept apart by it.
	Job bool `json:"job,omitempty"`
	// Reserved are values a TypeTable option may not use as keys, and
	// prefixes (ending in "*") of keys it may not use.
	Reserved []string `json:"reserved,omitempty"`
}

// Check validates opts (decoded TOML values: strings, bools, numbers, lists,
// tables) against d's options and returns them as wire strings, defaults
// not filled in. key is the entry's dotted name ("models.model#2"); an
// error is a confval.KeyError naming key.options.NAME.
func (d Descriptor) Check(key string, opts map[string]any) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(opts)) {
		o, ok := d.Option(name)
		if !ok {
			return nil, confval.Bad(key+".options."+name, "backend %q has no option %q (it has: %s)", d.Name, name, d.optionNames())
		}
		s, err := o.wire(opts[name])
		if err != nil {
			return nil, confval.Bad(key+".options."+name, "%v", err)
		}
		out[name] = s
	}
	for _, o := range d.Options {
		if _, ok := out[o.Name]; o.Required && !ok {
			return nil, confval.Bad(key+".options."+o.Name, "is required for backend %q: %s", d.Name, o.Help)
		}
	}
	return out, nil
}

// Resolve returns the options a model loads with: the defaults under the
// entry's values.
func (d Descriptor) Resolve(set map[string]string) map[string]string {
	out := map[string]string{}
	for _, o := range d.Options {
		if o.Default != "" {
			out[o.Name] = o.Default
		}
	}
	maps.Copy(out, set)
	return out
}

func (d Descriptor) optionNames() string {
	if len(d.Options) == 0 {
		return "none"
	}
	names := make([]string, len(d.Options))
	for i, o := range d.Options {
		names[i] = o.Name
	}
	return strings.Join(names, ", ")
}

// wire converts a decoded value of o to its wire string.
func (o Option) wire(v any) (string, error) {
	switch o.Type {
	case TypeBool:
		b, ok := v.(bool)
		if !ok {
			return "", fmt.Errorf("%v is not allowed: want true or false", v)
		}
		return strconv.FormatBool(b), nil
	case TypeInt:
		n, ok := asFloat(v)
		if !ok || n != math.Trunc(n) {
			return "", fmt.Errorf("%v is not allowed: want a whole number", v)
		}
		return strconv.FormatInt(int64(n), 10), nil
	case TypeFloat:
		n, ok := asFloat(v)
		if !ok {
			return "", fmt.Errorf("%v is not allowed: want a number", v)
		}
		return strconv.FormatFloat(n, 'f', -1, 64), nil
	case TypeList:
		return o.list(v)
	case TypeTable:
		return o.table(v)
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%v is not allowed: want a string", v)
	}
	return s, o.checkString(s)
}

// CheckWire checks a value as it travels (a string): a job's value for a
// Job option, say. The error names the value, not the key.
func (o Option) CheckWire(s string) error {
	switch o.Type {
	case TypeBool:
		if _, err := strconv.ParseBool(s); err != nil {
			return fmt.Errorf("%q is not allowed: want true or false", s)
		}
	case TypeInt:
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return fmt.Errorf("%q is not allowed: want a whole number", s)
		}
	case TypeFloat:
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return fmt.Errorf("%q is not allowed: want a number", s)
		}
	case TypeList, TypeTable:
		if !json.Valid([]byte(s)) {
			return fmt.Errorf("%q is not allowed: want JSON", s)
		}
	}
	return o.checkString(s)
}

func (o Option) checkString(s string) error {
	switch o.Type {
	case TypeEnum:
		if !slices.Contains(o.Values, s) {
			return fmt.Errorf("%q is not allowed: want one of %s", s, strings.Join(o.Values, ", "))
		}
	case TypeDuration:
		if d, err := time.ParseDuration(s); err != nil || d <= 0 {
			return fmt.Errorf("%q is not allowed: want a duration above 0, e.g. \"30s\"", s)
		}
	case TypeRoute:
		if !strings.HasPrefix(s, "/") {
			return fmt.Errorf("%q is not allowed: want a route starting with /", s)
		}
	case TypeAbsPath:
		if !strings.HasPrefix(s, "/") {
			return fmt.Errorf("%q is not allowed: want an absolute path", s)
		}
	}
	return nil
}

func asFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func (o Option) list(v any) (string, error) {
	var out []string
	switch l := v.(type) {
	case []string:
		out = l
	case []any:
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("%v is not allowed: want a list of strings", v)
			}
			out = append(out, s)
		}
	default:
		return "", fmt.Errorf("%v is not allowed: want a list of strings", v)
	}
	if o.Required && (len(out) == 0 || strings.TrimSpace(out[0]) == "") {
		return "", fmt.Errorf("is empty: %s", o.Help)
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func (o Option) table(v any) (string, error) {
	out := map[string]string{}
	switch t := v.(type) {
	case map[string]string:
		out = t
	case map[string]any:
		for k, e := range t {
			s, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("%s: %v is not allowed: want a string", k, e)
			}
			out[k] = s
		}
	default:
		return "", fmt.Errorf("%v is not allowed: want a table of strings", v)
	}
	for k := range out {
		if k == "" || strings.Contains(k, "=") || o.reserved(k) {
			return "", fmt.Errorf("%q: not allowed: the backend sets %s itself", k, strings.Join(o.Reserved, ", "))
		}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func (o Option) reserved(k string) bool {
	for _, r := range o.Reserved {
		if p, ok := strings.CutSuffix(r, "*"); ok && strings.HasPrefix(k, p) || r == k {
			return true
		}
	}
	return false
}
