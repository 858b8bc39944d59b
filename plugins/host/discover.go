package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// BinaryPrefix starts the file name of every backend executable.
const BinaryPrefix = "wsched-backend-"

// Binary is a backend executable that discovery accepted.
type Binary struct {
	Name string // NAME in wsched-backend-NAME
	Path string // absolute
	// stamp identifies the file's version, for the Info cache.
	stamp fileStamp
}

// Refused is a file (or directory) discovery will not run, and why.
type Refused struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// fileStamp changes whenever a file is replaced or rewritten.
type fileStamp struct {
	ino, size int64
	mtime     int64
	ctime     int64
}

// Scan lists the backends in dirs, searched in order: the first file for a
// NAME wins and later ones are refused as shadowed. A directory that does
// not exist is skipped. uid is the daemon's user; files must belong to it or
// to root.
func Scan(dirs []string, uid int) ([]Binary, []Refused) {
	var found []Binary
	var refused []Refused
	seen := map[string]string{}
	for _, dir := range dirs {
		names, err := readDir(dir, uid)
		if err != nil {
			refused = append(refused, Refused{Path: dir, Reason: err.Error()})
			continue
		}
		for _, file := range names {
			path := filepath.Join(dir, file)
			name := strings.TrimPrefix(file, BinaryPrefix)
			if first, ok := seen[name]; ok {
				refused = append(refused, Refused{Path: path, Reason: "shadowed by " + first})
				continue
			}
			if !validName(name) {
				refused = append(refused, Refused{Path: path, Reason: fmt.Sprintf("%q is not a backend name: want letters, digits, '-' or '_'", name)})
				continue
			}
			stamp, reason := checkFile(path, uid)
			if reason != "" {
				refused = append(refused, Refused{Path: path, Reason: reason})
				continue
			}
			seen[name] = path
			found = append(found, Binary{Name: name, Path: path, stamp: stamp})
		}
	}
	return found, refused
}

// readDir checks a plugin directory and returns the names in it that start
// with BinaryPrefix, sorted. A missing directory has none.
func readDir(dir string, uid int) ([]string, error) {
	st, err := os.Stat(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("plugin directory: not a directory")
	}
	if reason := checkMode(st); reason != "" {
		return nil, fmt.Errorf("plugin directory is %s", reason)
	}
	if !trusted(st, uid) {
		return nil, fmt.Errorf("plugin directory is %s", foreignOwner(st, uid))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), BinaryPrefix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// checkFile returns why path may not run as a backend ("" when it may).
// Symbolic links are followed: the file they point to is checked.
func checkFile(path string, uid int) (fileStamp, string) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err.Error()
	}
	switch {
	case !st.Mode().IsRegular():
		return fileStamp{}, "not a regular file"
	case st.Mode().Perm()&0o111 == 0:
		return fileStamp{}, fmt.Sprintf("not executable (mode %04o)", st.Mode().Perm())
	}
	if reason := checkMode(st); reason != "" {
		return fileStamp{}, reason
	}
	if !trusted(st, uid) {
		return fileStamp{}, foreignOwner(st, uid)
	}
	return stampOf(st), ""
}

// checkMode says whether others than the owner may write the file.
func checkMode(st os.FileInfo) string {
	perm := st.Mode().Perm()
	switch {
	case perm&0o002 != 0:
		return fmt.Sprintf("world-writable (mode %04o)", perm)
	case perm&0o020 != 0:
		return fmt.Sprintf("group-writable (mode %04o)", perm)
	}
	return ""
}

// foreignOwner is the reason for refusing a file root and uid do not own.
func foreignOwner(st os.FileInfo, uid int) string {
	return fmt.Sprintf("owned by uid %d, not by root or the daemon's user (uid %d)", owner(st), uid)
}

// trusted reports whether root or uid owns the file.
func trusted(st os.FileInfo, uid int) bool {
	o := owner(st)
	return o == 0 || o == uid
}

func owner(st os.FileInfo) int {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Uid)
	}
	return -1
}

func stampOf(st os.FileInfo) fileStamp {
	s := fileStamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		s.ino, s.ctime = int64(sys.Ino), sys.Ctim.Nano()
	}
	return s
}

// validName accepts the NAME part of a backend file name.
func validName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// absDirs makes relative directories absolute against the working
// directory and drops empty entries and repeats.
func absDirs(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}
