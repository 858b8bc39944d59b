package config

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsched/wsched/internal/device"
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

func (c *Config) validate() error {
	for _, check := range []func() error{c.Daemon.validate, c.Inventory.validate, c.Placement.validate, c.Leases.validate, c.Backends.validate} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (b Backends) validate() error {
	if err := b.validatePlugins(); err != nil {
		return err
	}
	switch {
	case b.MaxRetries < 0 || b.MaxRetries > 100:
		return bad("backends.max_retries", "%d is not allowed: want 0 to 100", b.MaxRetries)
	case b.JobTimeout <= 0:
		return bad("backends.job_timeout", "%s is not allowed: want a duration above 0", b.JobTimeout)
	case b.ResultTTL <= 0:
		return bad("backends.result_ttl", "%s is not allowed: want a duration above 0", b.ResultTTL)
	case b.MaxActiveJobs < 1:
		return bad("backends.max_active_jobs", "%d is not allowed: want at least 1", b.MaxActiveJobs)
	case b.MaxUpload < units.Bytes(units.KiB):
		return bad("backends.max_upload", "%s is not allowed: want at least 1KiB", b.MaxUpload.Exact())
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
	return nil
}

func (inv Inventory) validate() error {
	if inv.RefreshInterval < units.Duration(100*time.Millisecond) {
		return bad("inventory.refresh_interval", "%s is not allowed: want at least 100ms", inv.RefreshInterval)
	}
	if inv.Provider == ProviderSim && len(inv.Sim) == 0 {
		return bad("inventory.provider", `"sim" needs at least one [[inventory.sim]] GPU`)
	}
	for i, g := range inv.Sim {
		if err := g.validate(fmt.Sprintf("inventory.sim#%d", i)); err != nil {
			return err
		}
	}
	return nil
}

func (g SimGPU) validate(key string) error {
	if g.Memory <= 0 {
		return bad(key+".memory", "%s is not allowed: want a size above 0B", g.Memory.Exact())
	}
	var procs int64
	for j, p := range g.Processes {
		pk := fmt.Sprintf("%s.process#%d", key, j)
		if p.PID <= 0 {
			return bad(pk+".pid", "%d is not allowed: want a PID above 0", p.PID)
		}
		procs += int64(p.Used)
	}
	if g.Used != nil {
		if *g.Used > g.Memory {
			return bad(key+".used", "%s is more than memory (%s)", g.Used.Exact(), g.Memory.Exact())
		}
		if int64(*g.Used) < procs {
			return bad(key+".used", "%s is less than its processes use (%s)", g.Used.Exact(), units.Bytes(procs).Exact())
		}
	} else if procs > int64(g.Memory) {
		return bad(key+".process", "processes use %s, more than memory (%s)", units.Bytes(procs).Exact(), g.Memory.Exact())
	}
	if g.Temperature < 0 || g.Temperature > 150 {
		return bad(key+".temperature", "%d is not allowed: want 0 to 150 (°C)", g.Temperature)
	}
	if g.Utilization < 0 || g.Utilization > 100 {
		return bad(key+".utilization", "%d is not allowed: want 0 to 100 (%%)", g.Utilization)
	}
	if g.UUID != "" {
		if s, err := device.Parse(g.UUID); err != nil || s.Kind != device.UUID {
			return bad(key+".uuid", "%q is not allowed: want a GPU UUID such as \"GPU-5a1c0a4e-…\"", g.UUID)
		}
	}
	return nil
}

func (p Placement) validate() error {
	if p.SafetyFactor <= 0 {
		return bad("placement.safety_factor", "0 is not allowed: want a number above 0 and at most 1")
	}
	for k := range p.ReservedPerGPU {
		s, err := device.Parse(k)
		isIndex := k != "" && strings.TrimLeft(k, "0123456789") == ""
		if !isIndex && (err != nil || s.Kind != device.UUID) {
			return bad("placement.reserved_per_gpu", "key %q is not allowed: want a GPU index (\"0\") or UUID", k)
		}
	}
	w := p.Score
	if w.Memory+w.Utilization+w.Temperature+w.Priority == 0 {
		return bad("placement.score", "all weights are 0: want at least one above 0")
	}
	if w.TemperatureLimit <= 0 || w.TemperatureLimit > 150 {
		return bad("placement.score.temperature_limit", "%d is not allowed: want 1 to 150 (°C)", w.TemperatureLimit)
	}
	return nil
}

func (l Leases) validate() error {
	switch {
	case l.DefaultTTL <= 0:
		return bad("leases.default_ttl", "%s is not allowed: want a duration above 0", l.DefaultTTL)
	case l.MaxTTL < l.DefaultTTL:
		return bad("leases.max_ttl", "%s is less than default_ttl (%s)", l.MaxTTL, l.DefaultTTL)
	case l.MaxQueue < 1 || l.MaxQueue > 1_000_000:
		return bad("leases.max_queue", "%d is not allowed: want 1 to 1000000", l.MaxQueue)
	case l.Aging <= 0:
		return bad("leases.aging", "%s is not allowed: want a duration above 0", l.Aging)
	}
	return nil
}

func (b Backends) validateModels() error {
	if b.ModelsDir != "" && !filepath.IsAbs(b.ModelsDir) {
		return bad("backends.models_dir", "%q is not allowed: want an absolute path", b.ModelsDir)
	}
	if u, err := url.Parse(b.ModelsURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("backends.models_url", "%q is not allowed: want an http:// or https:// URL", b.ModelsURL)
	}
	seen := map[string]int{}
	for i, m := range b.Models {
		key := fmt.Sprintf("backends.model#%d", i)
		switch {
		case strings.TrimSpace(m.Name) == "":
			return bad(key+".name", "is empty: want the name clients ask for")
		case strings.TrimSpace(m.Backend) == "":
			return bad(key+".backend", "is empty: want the backend that serves %q (whisper.cpp, say)", m.Name)
		case !filepath.IsAbs(m.Path):
			return bad(key+".path", "%q is not allowed: want an absolute path", m.Path)
		}
		if j, dup := seen[m.Name]; dup {
			return bad(key+".name", "%q is already the name of model entry %d", m.Name, j+1)
		}
		seen[m.Name] = i
	}
	return nil
}

func (b Backends) validatePlugins() error {
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
	return b.validateModels()
}
