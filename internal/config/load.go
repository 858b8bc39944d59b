package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/wsched/wsched/internal/device"
)

// Sentinel errors, wrapped by *Error.
var (
	ErrUnknownKey = errors.New("unknown key")
	ErrBadValue   = errors.New("bad value")
	ErrSyntax     = errors.New("syntax error")
)

// DefaultPath is the system config file, read when present and no other
// file is named.
const DefaultPath = "/etc/wsched/wsched.toml"

// Error is a configuration error that names the file, the line (0 when
// unknown), and the key.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
	Err  error // ErrUnknownKey, ErrBadValue or ErrSyntax
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Options controls Load. The zero value reads the process environment.
type Options struct {
	// Path is the file named on the command line (--config); it wins over
	// WSCHED_CONFIG and DefaultPath.
	Path string
	// LookupEnv reads environment variables (os.LookupEnv when nil).
	LookupEnv func(string) (string, bool)
	// UID decides the root/non-root defaults (os.Getuid when nil).
	UID *int
}

func (o Options) lookup(k string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv(k)
	}
	return os.LookupEnv(k)
}

func (o Options) getenv(k string) string { v, _ := o.lookup(k); return v }

func (o Options) uid() int {
	if o.UID != nil {
		return *o.UID
	}
	return os.Getuid()
}

// Load finds, reads and validates the configuration, then applies the
// environment overrides WSCHED_SOCKET, WSCHED_STATE_DIR, WSCHED_MODELS_DIR
// and WSCHED_DEVICE (or the legacy SENSEVOICE_DEVICE).
func Load(opts Options) (*Config, error) {
	cfg := Defaults()
	path, err := opts.findFile()
	if err != nil {
		return nil, err
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := decode(data, path, cfg); err != nil {
			return nil, err
		}
		cfg.Source = path
	}
	if err := applyEnv(cfg, opts); err != nil {
		return nil, err
	}
	cfg.resolvePaths(opts)
	return cfg, nil
}

// Parse decodes and validates TOML text as if read from file name, without
// environment overrides or path resolution.
func Parse(data []byte, name string) (*Config, error) {
	cfg := Defaults()
	if err := decode(data, name, cfg); err != nil {
		return nil, err
	}
	cfg.Source = name
	return cfg, nil
}

func (o Options) findFile() (string, error) {
	if o.Path != "" {
		return o.Path, nil
	}
	if p := o.getenv("WSCHED_CONFIG"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		return DefaultPath, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("stat %s: %w", DefaultPath, err)
	}
	return "", nil
}

func decode(data []byte, name string, cfg *Config) error {
	// Syntax first, into a generic map: every error after this is a value error.
	var generic map[string]any
	if _, err := toml.Decode(string(data), &generic); err != nil {
		return syntaxError(err, name)
	}
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(cfg)
	if err != nil {
		return valueError(err, name)
	}
	und, err := applyLegacy(data, name, cfg, md)
	if err != nil {
		return err
	}
	if len(und) > 0 {
		return unknownKey(und[0], data, name)
	}
	if err := cfg.validate(); err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			ce.File = name
			ce.Key = cfg.oldName(ce.Key)
			nth := ce.nth()
			ce.Line = locate(data, strings.Split(ce.Key, "."), nth)
		}
		return err
	}
	return nil
}

func syntaxError(err error, name string) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Position.Line, Msg: pe.Message, Err: ErrSyntax}
	}
	return &Error{File: name, Msg: err.Error(), Err: ErrSyntax}
}

// typeErr matches the decoder's type-mismatch errors, which are not
// ParseErrors: `toml: line 2 (last key "a.b"): incompatible types: …`.
var typeErr = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (.*)$`)

func valueError(err error, name string) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return &Error{File: name, Line: pe.Position.Line, Key: pe.LastKey, Msg: pe.Message, Err: ErrBadValue}
	}
	if m := typeErr.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: name, Line: line, Key: m[2], Msg: m[3], Err: ErrBadValue}
	}
	return &Error{File: name, Msg: err.Error(), Err: ErrBadValue}
}

func unknownKey(k toml.Key, data []byte, name string) error {
	key := k.String()
	msg := "unknown key"
	if s := suggest(k); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return &Error{File: name, Line: locate(data, k, 0), Key: key, Msg: msg, Err: ErrUnknownKey}
}

// applyEnv applies the environment overrides. Their paths may be relative:
// a shell user means the working directory, so they are made absolute
// against it (paths in the file must be absolute).
func applyEnv(cfg *Config, opts Options) error {
	for _, o := range []struct {
		name string
		dst  *string
	}{
		{"WSCHED_SOCKET", &cfg.Daemon.Socket},
		{"WSCHED_STATE_DIR", &cfg.Daemon.StateDir},
		{"WSCHED_MODELS_DIR", &cfg.Models.Dir},
	} {
		v := opts.getenv(o.name)
		if v == "" {
			continue
		}
		abs, err := filepath.Abs(v)
		if err != nil {
			return &Error{Key: o.name, Msg: fmt.Sprintf("%q: %v", v, err), Err: ErrBadValue}
		}
		*o.dst = abs
	}
	spec, name, err := device.FromEnv(opts.lookup)
	if err != nil {
		return &Error{Key: name, Msg: strings.TrimPrefix(err.Error(), name+": "), Err: ErrBadValue}
	}
	cfg.Device, cfg.DeviceVar = spec, name
	return nil
}

// resolvePaths fills the socket, state directory and models directory
// defaults that depend on who runs wsched.
func (c *Config) resolvePaths(opts Options) {
	root := opts.uid() == 0
	if c.Daemon.Socket == "" {
		c.Daemon.Socket = DefaultSocket(root, opts.getenv("XDG_RUNTIME_DIR"))
	}
	if c.Daemon.StateDir == "" {
		switch {
		case root:
			c.Daemon.StateDir = "/var/lib/wsched"
		case opts.getenv("XDG_STATE_HOME") != "":
			c.Daemon.StateDir = filepath.Join(opts.getenv("XDG_STATE_HOME"), "wsched")
		default:
			c.Daemon.StateDir = filepath.Join(opts.getenv("HOME"), ".local", "state", "wsched")
		}
	}
	if c.Models.Dir == "" {
		switch {
		case root:
			c.Models.Dir = "/var/lib/wsched/models"
		case opts.getenv("XDG_DATA_HOME") != "":
			c.Models.Dir = filepath.Join(opts.getenv("XDG_DATA_HOME"), "wsched", "models")
		default:
			c.Models.Dir = filepath.Join(opts.getenv("HOME"), ".local", "share", "wsched", "models")
		}
	}
}

// Spool is where uploads wait for their jobs: [jobs] spool_dir, or
// [daemon] state_dir/uploads.
func (c *Config) Spool() string {
	if c.Jobs.SpoolDir != "" {
		return c.Jobs.SpoolDir
	}
	return filepath.Join(c.Daemon.StateDir, "uploads")
}

// DefaultSocket is the socket path for root (/run/wsched/wsched.sock) or
// another user ($XDG_RUNTIME_DIR/wsched.sock, /tmp/wsched-UID.sock without
// XDG_RUNTIME_DIR).
func DefaultSocket(root bool, xdgRuntime string) string {
	switch {
	case root:
		return "/run/wsched/wsched.sock"
	case xdgRuntime != "":
		return filepath.Join(xdgRuntime, "wsched.sock")
	default:
		return filepath.Join(os.TempDir(), fmt.Sprintf("wsched-%d.sock", os.Getuid()))
	}
}

// Encode writes the effective configuration as TOML.
func (c *Config) Encode() ([]byte, error) {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		return nil, fmt.Errorf("encode config: %w", err)
	}
	return buf.Bytes(), nil
}
