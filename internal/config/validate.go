package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/internal/confval"
	"github.com/wsched/wsched/internal/units"
)

// bad returns a validation error for key (dotted; a "#n" suffix on a path
// element picks the n-th entry of an array of tables for line lookup).
func bad(key string, format string, args ...any) error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...), Err: ErrBadValue}
}

// nth extracts the array index encoded in the key ("inventory.sim#2.memory")
// and strips it from the key.
func (e *Error) nth() int {
	i := strings.IndexByte(e.Key, '#')
	if i < 0 {
		return 0
	}
	j := strings.IndexByte(e.Key[i:], '.')
	if j < 0 {
		j = len(e.Key) - i
	}
	n, _ := strconv.Atoi(e.Key[i+1 : i+j])
	e.Key = e.Key[:i] + e.Key[i+j:]
	return n
}

// section is one TOML section's validation: the packages that own a section
// report keys relative to it (*confval.KeyError).
type section struct {
	name  string
	check func() error
}

func (c *Config) validate() error {
	for _, s := range []section{
		{"daemon", c.Daemon.validate}, {"inventory", c.Inventory.Validate}, {"placement", c.Placement.Validate},
		{"leases", c.Leases.Validate}, {"backends", c.Backends.validate}, {"jobs", c.Jobs.validate}, {"models", c.Models.validate},
		{"kubernetes", c.Kubernetes.validate}, {"limits", c.Limits.validate}, {"enforcement", c.Enforcement.validate},
	} {
		err := s.check()
		var ke *confval.KeyError
		if errors.As(err, &ke) {
			return bad(s.name+"."+ke.Key, "%s", ke.Msg)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (d Daemon) validate() error {
	if d.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(d.HTTPListen); err != nil {
			return bad("daemon.http_listen", "%q is not allowed: want host:port, e.g. \"127.0.0.1:8080\"", d.HTTPListen)
		}
		if len(d.HTTPToken) < 16 {
			return bad("daemon.http_token", "the TCP listener needs a bearer token of at least 16 characters")
		}
	}
	if d.Socket != "" && !filepath.IsAbs(d.Socket) {
		return bad("daemon.socket", "%q is not allowed: want an absolute path", d.Socket)
	}
	if d.StateDir != "" && !filepath.IsAbs(d.StateDir) {
		return bad("daemon.state_dir", "%q is not allowed: want an absolute path", d.StateDir)
	}
	return d.validateConns()
}

func (b Backends) validate() error {
	switch {
	case b.PluginDir != "" && !filepath.IsAbs(b.PluginDir):
		return bad("backends.plugin_dir", "%q is not allowed: want an absolute path", b.PluginDir)
	case slices.Contains(b.DevDirs, ""):
		return bad("backends.dev_dirs", `"" is not allowed: want a directory`)
	case b.HealthInterval < units.Duration(100*time.Millisecond):
		return bad("backends.health_interval", "%s is not allowed: want at least 100ms", b.HealthInterval)
	case b.StartTimeout <= 0:
		return bad("backends.start_timeout", "%s is not allowed: want a duration above 0", b.StartTimeout)
	case b.MaxRestarts < 0 || b.MaxRestarts > 100:
		return bad("backends.max_restarts", "%d is not allowed: want 0 to 100", b.MaxRestarts)
	}
	return nil
}

func (j Jobs) validate() error {
	switch {
	case j.ShortReserve < 0:
		return bad("jobs.short_reserve", "%d is not allowed: want 0 (no reserve) or more", j.ShortReserve)
	case j.ShortAudio <= 0:
		return bad("jobs.short_audio", "%s is not allowed: want a duration above 0", j.ShortAudio)
	case j.ChunkOver < 0:
		return bad("jobs.chunk_over", "%s is not allowed: want 0 (never cut) or a duration above 0", j.ChunkOver)
	case j.ChunkOver > 0 && j.ChunkOver.D() < 30*time.Second:
		return bad("jobs.chunk_over", "%s is not allowed: want 0 (never cut) or at least 30s (one window)", j.ChunkOver)
	case j.MaxReorderWait < 0:
		return bad("jobs.max_reorder_wait", "%s is not allowed: want 0 (arrival order) or a duration above 0", j.MaxReorderWait)
	case j.MaxRetries < 0 || j.MaxRetries > 100:
		return bad("jobs.max_retries", "%d is not allowed: want 0 to 100", j.MaxRetries)
	case j.Timeout <= 0:
		return bad("jobs.timeout", "%s is not allowed: want a duration above 0", j.Timeout)
	case j.ResultTTL <= 0:
		return bad("jobs.result_ttl", "%s is not allowed: want a duration above 0", j.ResultTTL)
	case j.MaxActive < 1:
		return bad("jobs.max_active", "%d is not allowed: want at least 1", j.MaxActive)
	case j.MaxUpload < units.Bytes(units.KiB):
		return bad("jobs.max_upload", "%s is not allowed: want at least 1KiB", j.MaxUpload.Exact())
	}
	if err := j.validateTable(); err != nil {
		return err
	}
	return j.validateSpool()
}

func isAbs(p string) bool { return filepath.IsAbs(p) }

func (m Models) validate() error {
	if m.Dir != "" && !filepath.IsAbs(m.Dir) {
		return bad("models.dir", "%q is not allowed: want an absolute path", m.Dir)
	}
	if u, err := url.Parse(m.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("models.url", "%q is not allowed: want an http:// or https:// URL", m.URL)
	}
	seen := map[string]int{}
	for i, e := range m.Entries {
		key := fmt.Sprintf("models.model#%d", i)
		switch {
		case strings.TrimSpace(e.Name) == "":
			return bad(key+".name", "is empty: want the name clients ask for")
		case strings.TrimSpace(e.Backend) == "":
			return bad(key+".backend", "is empty: want the backend that serves %q (whisper.cpp, say)", e.Name)
		}
		if err := e.validate(key); err != nil {
			return err
		}
		if j, dup := seen[e.Name]; dup {
			return bad(key+".name", "%q is already the name of model entry %d", e.Name, j+1)
		}
		seen[e.Name] = i
	}
	return nil
}
