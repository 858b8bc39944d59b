package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/plugins/host"
	"github.com/wsched/wsched/plugins/sherpa/modeldir"
	whisperdesc "github.com/wsched/wsched/plugins/whisper/describe"
)

// commit is set at build time (make: -X main.commit=…); without it, the
// commit the Go tool recorded is used, when it recorded one.
var commit = ""

// build is what the binary knows about itself: the version make stamps in
// (-X main.version), and the commit and Go release the Go tool records.
type build struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"` // "" when built without VCS information (go test, -buildvcs=false)
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

func readBuild() build {
	b := build{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok && b.Commit == "" {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	return b
}

// String is the one line of `wsched --version`.
func (b build) String() string {
	commit := "unknown"
	if b.Commit != "" {
		commit = b.Commit[:min(12, len(b.Commit))]
		if b.Modified {
			commit += ", modified"
		}
	}
	return fmt.Sprintf("wsched %s (commit %s, %s, %s)", b.Version, commit, b.Go, b.Platform)
}

// engineKeys are the Info metadata keys in which backends report the
// version of the engine they link, with the engine's name.
var engineKeys = []struct{ key, name string }{{"whisper_cpp", whisperdesc.Name}, {"sherpa_onnx", modeldir.Name}}

// backendVersion is one backend binary's answer to Info.
type backendVersion struct {
	Name    string            `json:"name"`
	Path    string            `json:"path"`
	Version string            `json:"version,omitempty"`
	Engines map[string]string `json:"engines,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// versionReport is `wsched version --json`.
type versionReport struct {
	build
	// BackendDirs are where the backends were looked for ([backends]
	// plugin_dir and dev_dirs), as the daemon would.
	BackendDirs []string         `json:"backend_dirs"`
	Backends    []backendVersion `json:"backends"`
	// BackendsError says why no backend was asked (the configuration).
	BackendsError string `json:"backends_error,omitempty"`
}

func newVersionCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print wsched's version, commit and Go release, and each backend's engine version",
		Long: `Print wsched's version (as built by make), the commit and Go release it was built
from, and for every backend binary in [backends] plugin_dir and dev_dirs its own
version and the engine it links (whisper.cpp, sherpa-onnx), asked through the
plugin handshake and Info as 'wsched backends check' does: no daemon needed.
'wsched --version' prints the first line only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := a.versionReport(cmd.Context())
			if asJSON {
				return a.printJSON(r)
			}
			return renderVersion(a.out, r)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// versionReport asks each backend binary found for its Info, in parallel,
// each bounded by [backends] start_timeout (at most 10 s).
func (a *app) versionReport(ctx context.Context) versionReport {
	r := versionReport{build: readBuild(), Backends: []backendVersion{}}
	cfg, err := a.loadConfig()
	if err != nil {
		r.BackendsError = err.Error()
		return r
	}
	r.BackendDirs = append([]string{cfg.Backends.PluginDir}, cfg.Backends.DevDirs...)
	found, _ := host.Scan(r.BackendDirs, os.Geteuid())
	timeout := min(cfg.Backends.StartTimeout.D(), 10*time.Second)
	r.Backends = make([]backendVersion, len(found))
	var wg sync.WaitGroup
	for i, bin := range found {
		wg.Go(func() {
			v := backendVersion{Name: bin.Name, Path: bin.Path}
			if abs, err := filepath.Abs(bin.Path); err == nil {
				v.Path = abs
			}
			res, err := host.Check(ctx, bin.Path, nil, timeout)
			if err != nil {
				v.Error = err.Error()
			} else {
				v.Version = res.Info.Version
				for _, e := range engineKeys {
					if s := res.Info.Metadata[e.key]; s != "" {
						if v.Engines == nil {
							v.Engines = map[string]string{}
						}
						v.Engines[e.name] = s
					}
				}
			}
			r.Backends[i] = v
		})
	}
	wg.Wait()
	return r
}

func renderVersion(w io.Writer, r versionReport) error {
	fmt.Fprintln(w, r.build.String())
	switch {
	case r.BackendsError != "":
		_, err := fmt.Fprintf(w, "backends: not asked: %s\n", r.BackendsError)
		return err
	case len(r.Backends) == 0:
		_, err := fmt.Fprintf(w, "backends: none in %s\n", strings.Join(r.BackendDirs, ", "))
		return err
	}
	fmt.Fprintf(w, "backends (in %s):\n", strings.Join(r.BackendDirs, ", "))
	t := &table{header: []string{"NAME", "VERSION", "ENGINE", "PATH"}}
	for _, b := range r.Backends {
		var engines []string
		for _, e := range engineKeys {
			if s := b.Engines[e.name]; s != "" {
				engines = append(engines, e.name+" "+s)
			}
		}
		var notes []string
		if b.Error != "" {
			notes = append(notes, "! "+b.Error)
		}
		t.add([]string{b.Name, orDash(b.Version), orDash(strings.Join(engines, ", ")), b.Path}, notes...)
	}
	return t.render(w, "  ")
}
