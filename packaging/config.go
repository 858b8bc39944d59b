package packaging

import (
	"bytes"
	"fmt"
)

// packagedLines are the lines of the annotated default configuration (wsched.toml) that the package
// changes, each with what replaces it. The daemon runs from / under systemd, as user wsched:
//   - dev_dirs: the development directory "./bin" would be /bin there, and the daemon would run any
//     root-owned wsched-backend-* found in it; the package searches only PluginDir.
//   - [models] dir: "" resolves to $HOME/.local/share/wsched/models for a non-root daemon
//     (HOME=/var/lib/wsched) but to /var/lib/wsched/models for `wsched config check` run as root;
//     naming it makes both agree, on the unit's StateDirectory.
var packagedLines = []struct{ old, new string }{
	{`dev_dirs = ["./bin"]`, "# The package searches plugin_dir only (under systemd \"./bin\" would be /bin).\ndev_dirs = []"},
	{`dir = ""`, "# The package's models directory: /var/lib/wsched (wsched.service's StateDirectory) holds it.\ndir = \"/var/lib/wsched/models\""},
}

// PackagedConfig returns the default configuration as the package installs it at ConfigFile: src
// (wsched.toml) with packagedLines replaced. Each line must occur exactly once, so that a change of
// wsched.toml that moves one is noticed here rather than shipped unchanged.
func PackagedConfig(src []byte) ([]byte, error) {
	lines := bytes.Split(src, []byte("\n"))
	for _, r := range packagedLines {
		n := 0
		for i, l := range lines {
			if string(bytes.TrimSpace(l)) == r.old {
				lines[i] = []byte(r.new)
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("packaged configuration: %d lines %q in the default configuration, want 1", n, r.old)
		}
	}
	return bytes.Join(lines, []byte("\n")), nil
}
