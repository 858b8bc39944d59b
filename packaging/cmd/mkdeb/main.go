// Command mkdeb builds the Debian packages of wsched with nfpm: wsched_VERSION_ARCH.deb always, and
// wsched-backend-{whisper,sherpa,exec}_VERSION_ARCH.deb for each backend binary given. `make deb`
// runs it after building the binaries.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/wsched/wsched/packaging"
)

// revisionPattern is what Debian allows as a revision.
var revisionPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+~]*$`)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	describe, revision, arch string
	maintainer, date         string
	dir, out, shlibs         string
	wsched, config, whisper  string
	whisperLibs, preload     string
	sherpa, sherpaLibs, exec string
}

func parse(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("mkdeb", flag.ContinueOnError)
	fs.StringVar(&o.describe, "version", "", "`git describe` output (vX.Y.Z[-N-gHASH][-dirty]), turned into the Debian version")
	fs.StringVar(&o.revision, "revision", "1", "Debian revision appended to the version")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the binaries")
	fs.StringVar(&o.maintainer, "maintainer", "", "Maintainer field, \"Name <address>\"")
	fs.StringVar(&o.date, "date", "", "build date as Unix seconds (the commit time, for reproducible packages); default now")
	fs.StringVar(&o.dir, "dir", "packaging", "packaging directory (systemd/, sysusers.d/, tmpfiles.d/, scripts/, debian/)")
	fs.StringVar(&o.out, "out", "dist", "directory the .deb files are written to")
	fs.StringVar(&o.shlibs, "shlibs", packaging.DefaultShlibsDir, "directory of dpkg's *.shlibs files, for library dependencies")
	fs.StringVar(&o.wsched, "wsched", "", "built wsched binary (required)")
	fs.StringVar(&o.preload, "preload", "", "built libwsched_cuda_cap.so (make preload), installed as "+packaging.PreloadLib+"; empty: not shipped")
	fs.StringVar(&o.config, "config", "wsched.toml", "configuration file installed as "+packaging.ConfigFile)
	fs.StringVar(&o.whisper, "backend-whisper", "", "built wsched-backend-whisper binary; empty: no whisper backend package")
	fs.StringVar(&o.whisperLibs, "whisper-libs", "", "directory of the whisper.cpp/ggml libraries the whisper backend links, shipped in "+packaging.PrivateLibDir+"/whisper; empty: Debian's libwhisper1")
	fs.StringVar(&o.sherpa, "backend-sherpa", "", "built wsched-backend-sherpa binary; empty: no sherpa backend package")
	fs.StringVar(&o.sherpaLibs, "sherpa-libs", "", "directory of the sherpa-onnx and ONNX Runtime libraries (required with -backend-sherpa)")
	fs.StringVar(&o.exec, "backend-exec", "", "built wsched-backend-exec binary; empty: no exec backend package")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.wsched == "" || o.describe == "" || o.maintainer == "" {
		return o, errors.New("-wsched, -version and -maintainer are required")
	}
	if (o.sherpa == "") != (o.sherpaLibs == "") {
		return o, errors.New("-backend-sherpa and -sherpa-libs go together")
	}
	return o, nil
}

func run(ctx context.Context, args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	in, err := inputs(o)
	if err != nil {
		return err
	}
	shlibs, err := packaging.ReadShlibs(o.shlibs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", o.out, err)
	}
	pkgs, err := packages(o, in)
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		if err := ctx.Err(); err != nil {
			return err
		}
		path, err := packaging.Build(ctx, p, in, shlibs, o.out)
		if err != nil {
			return err
		}
		fmt.Println(path)
	}
	return nil
}

// packages describes every package the command line asks for. The configuration is the packaged
// variant of o.config (packaging.PackagedConfig), written next to the packages' build files.
func packages(o options, in packaging.Inputs) ([]packaging.Package, error) {
	src, err := os.ReadFile(o.config)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	cfg, err := packaging.PackagedConfig(src)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.out, ".wsched.toml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("write packaged configuration: %w", err)
	}
	pkgs := []packaging.Package{packaging.Wsched(in, o.wsched, cfgPath, o.preload)}
	if o.whisper != "" {
		p, err := packaging.BackendWhisper(in, o.whisper, o.whisperLibs)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if o.sherpa != "" {
		p, err := packaging.BackendSherpa(in, o.sherpa, o.sherpaLibs)
		if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if o.exec != "" {
		pkgs = append(pkgs, packaging.BackendExec(in, o.exec))
	}
	return pkgs, nil
}

// inputs checks the files named on the command line and derives the shared package inputs.
func inputs(o options) (packaging.Inputs, error) {
	for _, f := range []string{o.wsched, o.preload, o.config, o.whisper, o.whisperLibs, o.sherpa, o.sherpaLibs, o.exec} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return packaging.Inputs{}, fmt.Errorf("input: %w", err)
		}
	}
	version, err := packaging.DebianVersion(o.describe)
	if err != nil {
		return packaging.Inputs{}, err
	}
	date := time.Now()
	if o.date != "" {
		secs, err := strconv.ParseInt(o.date, 10, 64)
		if err != nil {
			return packaging.Inputs{}, fmt.Errorf("-date %q: want Unix seconds: %w", o.date, err)
		}
		date = time.Unix(secs, 0)
	}
	if !revisionPattern.MatchString(o.revision) {
		return packaging.Inputs{}, fmt.Errorf("-revision %q: want digits, letters, + . ~", o.revision)
	}
	return packaging.Inputs{Version: version + "-" + o.revision, Arch: o.arch, Maintainer: o.maintainer, Date: date.UTC(), Dir: o.dir}, nil
}
