// Package cgroup puts each process that holds a lease (a `wsched run`
// child, a backend and the apps it runs) in a cgroup of its own under
// wsched's, lists the processes in it, and kills it whole: a child that
// calls setsid or double-forks stays in its cgroup, so stopping the holder
// leaves nothing running outside a lease.
//
// It works on cgroup v2 (the unified hierarchy, at /sys/fs/cgroup or, on
// hybrid hosts, /sys/fs/cgroup/unified) and on cgroup v1 (the pids or
// freezer hierarchy), directly through the cgroup file system, under the
// cgroup the calling process is in. Under systemd the daemon's unit needs
// Delegate=yes for that subtree to be its own (packaging/); a systemd scope
// per holder is a follow-up (docs/enforcement.md).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Version is the cgroup hierarchy a Manager works in.
type Version string

// The hierarchies, in the order Open prefers them.
const (
	V2 Version = "v2"
	V1 Version = "v1"
)

// ErrUnavailable means no writable cgroup hierarchy was found.
var ErrUnavailable = errors.New("no writable cgroup hierarchy")

// Hierarchy is one mounted cgroup hierarchy and the calling process's place
// in it.
type Hierarchy struct {
	Version Version
	// Mount is where it is mounted; Own is the process's cgroup in it
	// (a path from the hierarchy's root, "/…").
	Mount, Own string
	// Controller names the v1 hierarchy (pids, freezer); "" on v2.
	Controller string
}

// Dir is the process's own cgroup directory.
func (h Hierarchy) Dir() string { return filepath.Join(h.Mount, h.Own) }

// Hierarchies lists the hierarchies Open can use, best first: v2 (its
// cgroup.kill ends a cgroup in one write), then v1 pids, then v1 freezer.
// procRoot is where /proc is mounted.
func Hierarchies(procRoot string) ([]Hierarchy, error) { return hierarchiesOf(procRoot, "self") }

// hierarchiesOf is Hierarchies with Own the cgroups of process who ("self"
// or a PID).
func hierarchiesOf(procRoot, who string) ([]Hierarchy, error) {
	mounts, err := readMounts(filepath.Join(procRoot, "self/mountinfo"))
	if err != nil {
		return nil, err
	}
	own, err := readOwn(filepath.Join(procRoot, who, "cgroup"))
	if err != nil {
		return nil, err
	}
	var out []Hierarchy
	for _, want := range []string{"", "pids", "freezer"} {
		for _, m := range mounts {
			if m.controller != want || (want == "") != (m.fstype == "cgroup2") {
				continue
			}
			path, ok := own[want]
			if !ok {
				continue
			}
			v := V1
			if want == "" {
				v = V2
			}
			out = append(out, Hierarchy{Version: v, Mount: m.dir, Own: path, Controller: want})
			break
		}
	}
	return out, nil
}

type mount struct{ dir, fstype, controller string }

// readMounts lists the cgroup mounts of a mountinfo file.
func readMounts(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: read mounts: %w", err)
	}
	defer f.Close()
	out, err := parseMounts(f)
	if err != nil {
		return nil, fmt.Errorf("cgroup: read mounts: %w", err)
	}
	return out, nil
}

// parseMounts lists the cgroup mounts of mountinfo text, with the v1
// controller each holds (pids, freezer; "" otherwise).
func parseMounts(r io.Reader) ([]mount, error) {
	var out []mount
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 || (tail[0] != "cgroup" && tail[0] != "cgroup2") {
			continue
		}
		m := mount{dir: unescape(fields[4]), fstype: tail[0]}
		for _, opt := range strings.Split(tail[2], ",") {
			if opt == "pids" || opt == "freezer" {
				m.controller = opt
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOwn reads /proc/self/cgroup (parseOwn).
func readOwn(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: read own cgroup: %w", err)
	}
	return parseOwn(data), nil
}

// parseOwn maps each hierarchy of /proc/PID/cgroup text to the process's
// path in it: "" for v2 ("0::/path"), the controller name for v1.
func parseOwn(data []byte) map[string]string {
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own
}
