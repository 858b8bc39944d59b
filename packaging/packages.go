package packaging

import (
	"io/fs"
	"path/filepath"
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
}

// Scripts are paths of maintainer scripts on the build machine; "" for none.
type Scripts struct {
	PostInst, PreRm, PostRm string
}

// Wsched is the daemon's package: the binary, the units, the sysusers/tmpfiles snippets, the
// configuration file and the (empty) plugin directory that backend packages fill.
func Wsched(in Inputs, binary, config string) Package {
	d := func(parts ...string) string { return filepath.Join(append([]string{in.Dir}, parts...)...) }
	return Package{
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
}

// BackendWhisper is the whisper.cpp backend's package. Its libraries (libwhisper1, libggml0) become
// dependencies when Build reads the binary; ggml finds GPU backends at run time, so the CUDA one is
// recommended rather than linked.
func BackendWhisper(in Inputs, binary string) Package {
	return Package{
		Name:     "wsched-backend-whisper",
		Synopsis: "whisper.cpp backend for the wsched GPU memory placement daemon",
		Description: "Runs Whisper speech-to-text models with whisper.cpp (libwhisper) for wsched. " +
			"The daemon starts it as a plugin process inside the memory it leased. Install " +
			"libggml0-backend-cuda to run the models on NVIDIA GPUs.",
		Depends:    []string{"wsched (= " + in.Version + ")"},
		Recommends: []string{"libggml0-backend-cuda"},
		Files: []File{
			{Src: binary, Dst: PluginDir + "/wsched-backend-whisper", Mode: 0o755},
		},
		Scripts: Scripts{
			PostInst: filepath.Join(in.Dir, "scripts", "wsched-backend-whisper.postinst"),
			PostRm:   filepath.Join(in.Dir, "scripts", "wsched-backend-whisper.postrm"),
		},
	}
}
