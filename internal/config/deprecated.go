package config

import (
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/wsched/wsched/internal/units"
)

// Deprecation is an old key the file set. Its value was applied to the new
// key; the old name keeps working.
type Deprecation struct {
	File string
	Line int
	Old  string // dotted: "backends.job_timeout"
	New  string // dotted: "jobs.timeout"
}

func (d Deprecation) String() string {
	where := d.File
	if d.Line > 0 {
		where = fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return fmt.Sprintf("%s: %s is deprecated, use %s (the value was applied)", where, d.Old, d.New)
}

// legacyBackends holds the [backends] keys that moved to [jobs] and [models].
type legacyBackends struct {
	MaxRetries    *int            `toml:"max_retries"`
	JobTimeout    *units.Duration `toml:"job_timeout"`
	ResultTTL     *units.Duration `toml:"result_ttl"`
	MaxActiveJobs *int            `toml:"max_active_jobs"`
	MaxUpload     *units.Bytes    `toml:"max_upload"`
	DefaultModel  *string         `toml:"default_model"`
	ModelsDir     *string         `toml:"models_dir"`
	ModelsURL     *string         `toml:"models_url"`
	Models        []Model         `toml:"model"`
}

type legacyFile struct {
	Backends legacyBackends `toml:"backends"`
}

// movedKey is one key that changed its name; apply copies the old value to
// the new field and reports whether the old key was set.
type movedKey struct {
	old, new string
	apply    func(*Config, *legacyBackends) bool
}

// movedKeys lists every renamed key, old → new.
func movedKeys() []movedKey {
	return []movedKey{
		{"backends.max_retries", "jobs.max_retries", func(c *Config, l *legacyBackends) bool { return set(&c.Jobs.MaxRetries, l.MaxRetries) }},
		{"backends.job_timeout", "jobs.timeout", func(c *Config, l *legacyBackends) bool { return set(&c.Jobs.Timeout, l.JobTimeout) }},
		{"backends.result_ttl", "jobs.result_ttl", func(c *Config, l *legacyBackends) bool { return set(&c.Jobs.ResultTTL, l.ResultTTL) }},
		{"backends.max_active_jobs", "jobs.max_active", func(c *Config, l *legacyBackends) bool { return set(&c.Jobs.MaxActive, l.MaxActiveJobs) }},
		{"backends.max_upload", "jobs.max_upload", func(c *Config, l *legacyBackends) bool { return set(&c.Jobs.MaxUpload, l.MaxUpload) }},
		{"backends.default_model", "models.default", func(c *Config, l *legacyBackends) bool { return set(&c.Models.Default, l.DefaultModel) }},
		{"backends.models_dir", "models.dir", func(c *Config, l *legacyBackends) bool { return set(&c.Models.Dir, l.ModelsDir) }},
		{"backends.models_url", "models.url", func(c *Config, l *legacyBackends) bool { return set(&c.Models.URL, l.ModelsURL) }},
		{"backends.model", "models.model", func(c *Config, l *legacyBackends) bool {
			if l.Models == nil {
				return false
			}
			c.Models.Entries = l.Models
			return true
		}},
	}
}

func set[T any](dst, src *T) bool {
	if src == nil {
		return false
	}
	*dst = *src
	return true
}

// applyLegacy reads the old keys from data, applies each to its new key
// and records a Deprecation. Setting both names of one key is an error.
// It returns the keys neither decoding knows.
func applyLegacy(data []byte, name string, cfg *Config, md toml.MetaData) ([]toml.Key, error) {
	var lf legacyFile
	lmd, err := toml.NewDecoder(strings.NewReader(string(data))).Decode(&lf)
	if err != nil {
		return nil, valueError(err, name)
	}
	for _, m := range movedKeys() {
		if !m.apply(cfg, &lf.Backends) {
			continue
		}
		oldKey, newKey := strings.Split(m.old, "."), strings.Split(m.new, ".")
		if md.IsDefined(newKey...) {
			return nil, &Error{File: name, Line: locate(data, oldKey, 0), Key: m.old, Err: ErrBadValue,
				Msg: fmt.Sprintf("is the deprecated name of %s, which is set too: keep only %s", m.new, m.new)}
		}
		cfg.Deprecations = append(cfg.Deprecations, Deprecation{File: name, Line: locate(data, oldKey, 0), Old: m.old, New: m.new})
	}
	legacyUnknown := map[string]bool{}
	for _, k := range lmd.Undecoded() {
		legacyUnknown[k.String()] = true
	}
	var unknown []toml.Key
	for _, k := range md.Undecoded() {
		if legacyUnknown[k.String()] {
			unknown = append(unknown, k)
		}
	}
	return unknown, nil
}

// oldName maps a validation key on a new key that an old key set back to
// the old key, so the error names what the file says.
func (c *Config) oldName(key string) string {
	for _, d := range c.Deprecations {
		if key == d.New || strings.HasPrefix(key, d.New+".") || strings.HasPrefix(key, d.New+"#") {
			return d.Old + key[len(d.New):]
		}
	}
	return key
}
