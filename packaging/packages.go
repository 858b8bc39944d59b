package packaging

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Where the packages put things; the units and the daemon's defaults expect exactly these paths.
const (
	BinDir      = "/usr/bin"
	PluginDir   = "/usr/lib/wsched/plugins"
	UnitDir     = "/usr/lib/systemd/system"
	SysusersDir = "/usr/lib/sysusers.d"
	TmpfilesDir = "/usr/lib/tmpfiles.d"
	ConfigFile  = "/etc/wsched/wsched.toml"
	// PrometheusDir holds the alerting rules and the Grafana dashboard (packaging/prometheus).
	PrometheusDir = "/usr/share/wsched/prometheus"
	// PreloadLib is the `preload` enforcement tier's allocation cap (enforce/preload/c, issue 27),
	// where the daemon looks for it (enforce/preload.Dirs) and puts it in its holders' LD_PRELOAD.
	PreloadLib = "/usr/lib/wsched/libwsched_cuda_cap.so"
)

// Homepage is the project's address, written into the control files.
const Homepage = "https://github.com/wsched/wsched"

// Inputs are what all packages of one build share.
type Inputs struct {
	Version    string    // full Debian version: DebianVersion(…) + "-" + revision
	Arch       string    // GOARCH of the binaries; nfpm maps it to the Debian architecture
	Maintainer string    // "Name <address>"
	Date       time.Time // commit time: file times and changelog date, so builds are reproducible
	Dir        string    // the packaging directory: systemd/, sysusers.d/, tmpfiles.d/, scripts/, debian/
}

// Package is one .deb: control fields, files and maintainer scripts.
type Package struct {
	Name        string
	Synopsis    string   // the Description's first line
	Description string   // the extended description, one paragraph
	Depends     []string // besides the libraries of its binaries, which Build adds
	Recommends  []string
	Files       []File
	Scripts     Scripts
}

// File is one entry of a package.
type File struct {
	Src      string // path on the build machine; "" for a directory
	Dst      string // absolute path on the target system
	Mode     fs.FileMode
	Conffile bool // a file under /etc that dpkg keeps when the administrator changed it
	Gzip     bool // compress Src into Dst (manual pages)
	// Library marks a shared library (or loader) the package ships privately (PrivateLibs): it is
	// not stripped, its own dependencies count, and its soname needs no dependency.
	Library bool
	// Runpath, for an executable, replaces its DT_RUNPATH/DT_RPATH when staged (SetRunpath).
	Runpath string
}

// Scripts are paths of maintainer scripts on the build machine; "" for none.
type Scripts struct {
	PostInst, PreRm, PostRm string
}

// Wsched is the daemon's package: the binary, the units, the sysusers/tmpfiles snippets, the
// configuration file, the (empty) plugin directory that backend packages fill and, when preload is
// not "", the allocation-cap library built by `make preload` (at PreloadLib).
func Wsched(in Inputs, binary, config, preload string) Package {
	d := func(parts ...string) string { return filepath.Join(append([]string{in.Dir}, parts...)...) }
	p := Package{
		Name:     "wsched",
		Synopsis: "GPU memory placement daemon for speech-to-text services",
		Description: "wsched leases GPU memory to the processes that run speech-to-text models " +
			"(Whisper, SenseVoice) so that they do not run out of memory on a shared GPU. Clients " +
			"ask the daemon over a Unix socket; the daemon accounts for what every GPU holds and " +
			"places each request. Backends are packaged separately.",
		Files: []File{
			{Src: binary, Dst: BinDir + "/wsched", Mode: 0o755},
			{Src: d("systemd", "wsched.service"), Dst: UnitDir + "/wsched.service", Mode: 0o644},
			{Src: d("systemd", "wsched.socket"), Dst: UnitDir + "/wsched.socket", Mode: 0o644},
			{Src: d("sysusers.d", "wsched.conf"), Dst: SysusersDir + "/wsched.conf", Mode: 0o644},
			{Src: d("tmpfiles.d", "wsched.conf"), Dst: TmpfilesDir + "/wsched.conf", Mode: 0o644},
			{Src: config, Dst: ConfigFile, Mode: 0o644, Conffile: true},
			{Src: d("man", "wsched.1"), Dst: "/usr/share/man/man1/wsched.1.gz", Mode: 0o644, Gzip: true},
			{Src: d("prometheus", "wsched-rules.yml"), Dst: PrometheusDir + "/wsched-rules.yml", Mode: 0o644},
			{Src: d("prometheus", "wsched-dashboard.json"), Dst: PrometheusDir + "/wsched-dashboard.json", Mode: 0o644},
			{Dst: PluginDir, Mode: 0o755},
		},
		Scripts: Scripts{
			PostInst: d("scripts", "wsched.postinst"),
			PreRm:    d("scripts", "wsched.prerm"),
			PostRm:   d("scripts", "wsched.postrm"),
		},
	}
	if preload != "" {
		// A private library (not in the loader's path, no soname users): shipped as built — make
		// deb links it stripped and hardened — and its libc dependency counts.
		p.Files = append(p.Files, File{Src: preload, Dst: PreloadLib, Mode: 0o644, Library: true})
	}
	return p
}

// lintianOverrides is the package's lintian overrides file (packaging/lintian/NAME): the tags its
// private libraries raise, each explained there.
func lintianOverrides(in Inputs, name string) File {
	return File{Src: filepath.Join(in.Dir, "lintian", name), Dst: "/usr/share/lintian/overrides/" + name, Mode: 0o644}
}

// backendScripts restart a running daemon after a backend is installed, upgraded or removed.
func backendScripts(in Inputs) Scripts {
	return Scripts{
		PostInst: filepath.Join(in.Dir, "scripts", "wsched-backend.postinst"),
		PostRm:   filepath.Join(in.Dir, "scripts", "wsched-backend.postrm"),
	}
}

// BackendWhisper is the whisper.cpp backend's package. With libDir "" the binary links the
// system's libwhisper1 and libggml0 (make deps' route "system": Debian releases that have them),
// which become dependencies; ggml finds GPU backends at run time, so the CUDA one is recommended.
// Otherwise libDir holds the whisper.cpp and ggml libraries the binary was linked against (a source
// build, or the bundle of Debian packages from a newer suite with their own libc and loader):
// the package ships what the binary needs from there in PrivateLibDir/whisper, where the binary's
// RPATH (and, for the bundle, its PT_INTERP) already points, with ggml's CPU backend modules
// (libDir/ggml/backends0) when there are any.
func BackendWhisper(in Inputs, binary, libDir string) (Package, error) {
	p := Package{
		Name:     "wsched-backend-whisper",
		Synopsis: "whisper.cpp backend for the wsched GPU memory placement daemon",
		Description: "Runs Whisper speech-to-text models with whisper.cpp (libwhisper) for wsched. " +
			"The daemon starts it as a plugin process inside the memory it leased.",
		Depends: []string{"wsched (= " + in.Version + ")"},
		Files: []File{
			{Src: binary, Dst: PluginDir + "/wsched-backend-whisper", Mode: 0o755},
		},
		Scripts: backendScripts(in),
	}
	if libDir == "" {
		p.Description += " Install libggml0-backend-cuda to run the models on NVIDIA GPUs."
		p.Recommends = []string{"libggml0-backend-cuda"}
		return p, nil
	}
	p.Description += " whisper.cpp and ggml are included, in " + PrivateLibDir + "/whisper."
	dst := PrivateLibDir + "/whisper"
	p.Files = append(p.Files, lintianOverrides(in, p.Name))
	roots := []string{binary}
	modules, _ := filepath.Glob(filepath.Join(libDir, "ggml", "backends0", "*.so"))
	for _, m := range modules {
		p.Files = append(p.Files, File{Src: m, Dst: dst + "/ggml/backends0/" + filepath.Base(m), Mode: 0o644, Library: true})
		roots = append(roots, m)
	}
	libs, err := PrivateLibs(libDir, dst, roots...)
	if err != nil {
		return Package{}, fmt.Errorf("package wsched-backend-whisper: %w", err)
	}
	if !slices.ContainsFunc(libs, func(f File) bool { return strings.HasPrefix(filepath.Base(f.Dst), "libwhisper.so") }) {
		return Package{}, fmt.Errorf("package wsched-backend-whisper: %s does not link a libwhisper from %s", binary, libDir)
	}
	// The bundle's libraries come from Debian packages, whose copyright files travel with them.
	notices, _ := filepath.Glob(filepath.Join(libDir, "..", "..", "share", "doc", "*", "copyright"))
	for _, n := range notices {
		pkg := filepath.Base(filepath.Dir(n))
		p.Files = append(p.Files, File{Src: n, Dst: "/usr/share/doc/wsched-backend-whisper/bundled/" + pkg + "/copyright", Mode: 0o644})
	}
	for i, f := range libs {
		if hasRunpath(f.Src) {
			libs[i].Runpath = dst // a source build's libraries name the build machine's prefix
		}
	}
	p.Files = append(p.Files, libs...)
	return p, nil
}

// BackendSherpa is the sherpa-onnx backend's package: the binary and the sherpa-onnx and ONNX
// Runtime libraries of the Go module github.com/k2-fsa/sherpa-onnx-go-linux (libDir), which
// Debian does not package, in PrivateLibDir/sherpa; the binary's RUNPATH is set to that directory.
// They need only an old glibc and libstdc++, which become dependencies.
func BackendSherpa(in Inputs, binary, libDir string) (Package, error) {
	dst := PrivateLibDir + "/sherpa"
	libs, err := PrivateLibs(libDir, dst, binary)
	if err != nil {
		return Package{}, fmt.Errorf("package wsched-backend-sherpa: %w", err)
	}
	if len(libs) == 0 {
		return Package{}, fmt.Errorf("package wsched-backend-sherpa: %s links no library from %s", binary, libDir)
	}
	return Package{
		Name:     "wsched-backend-sherpa",
		Synopsis: "sherpa-onnx backend for the wsched GPU memory placement daemon",
		Description: "Runs SenseVoice and other ONNX speech-to-text models with sherpa-onnx and ONNX " +
			"Runtime (included, in " + dst + ") for wsched. The daemon starts it as a plugin " +
			"process inside the memory it leased.",
		Depends: []string{"wsched (= " + in.Version + ")"},
		Files: append([]File{
			{Src: binary, Dst: PluginDir + "/wsched-backend-sherpa", Mode: 0o755, Runpath: dst},
			lintianOverrides(in, "wsched-backend-sherpa"),
		}, libs...),
		Scripts: backendScripts(in),
	}, nil
}

// BackendExec is the exec backend's package: it runs an existing speech-to-text HTTP app (a
// SenseVoice server, say) as a wsched backend, talking to it over loopback.
func BackendExec(in Inputs, binary string) Package {
	return Package{
		Name:     "wsched-backend-exec",
		Synopsis: "exec backend for the wsched GPU memory placement daemon",
		Description: "Runs an existing speech-to-text HTTP application as a wsched backend: the " +
			"daemon starts it inside the GPU memory it leased, on a loopback port it picks " +
			"(SENSEVOICE_HOST, SENSEVOICE_PORT), and forwards transcription jobs to it.",
		Depends: []string{"wsched (= " + in.Version + ")"},
		Files: []File{
			{Src: binary, Dst: PluginDir + "/wsched-backend-exec", Mode: 0o755},
		},
		Scripts: backendScripts(in),
	}
}
