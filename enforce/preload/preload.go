// Package preload is the Go side of the `preload` enforcement tier: where
// the allocation-cap library is installed and the environment that puts it
// in front of the CUDA driver for a lease's holder. The library itself is C
// (c/wsched_cuda_cap.c, c/arrays.c and c/report.c under this package, built by `make preload`): it caps the
// driver's allocation entry points at WSCHED_CUDA_LIMIT_BYTES, answers
// CUDA_ERROR_OUT_OF_MEMORY past it, and reports refusals to the daemon
// (POST /v1/leases/{id}/usage). See docs/enforcement.md.
package preload

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// LibName is the library's file name.
const LibName = "libwsched_cuda_cap.so"

// Dirs are where Find looks, in order: beside the running wsched binary
// (make build puts both into bin/), then the package's library directories.
func Dirs() []string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	return append(dirs, "/usr/lib/wsched", "/usr/local/lib/wsched")
}

// Find returns the first dir holding LibName.
func Find(dirs []string) (string, bool) {
	for _, d := range dirs {
		p := filepath.Join(d, LibName)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return "", false
}

// Env is what a holder's environment gains: lib in front of LD_PRELOAD
// (inherited holds the holder's own, kept after it), the cap (lease plus
// borrow) and the socket the library reports to.
func Env(lib, inherited string, leaseBytes, borrowBytes int64, socket string) map[string]string {
	preload := lib
	for _, p := range strings.FieldsFunc(inherited, func(r rune) bool { return r == ':' || r == ' ' }) {
		if p != lib {
			preload += ":" + p
		}
	}
	env := map[string]string{
		"LD_PRELOAD":              preload,
		"WSCHED_CUDA_LIMIT_BYTES": strconv.FormatInt(leaseBytes+max(borrowBytes, 0), 10),
	}
	if socket != "" {
		env["WSCHED_SOCKET"] = socket
	}
	return env
}

// HostVars are the variables Env adds: they name files of the host (the
// library, the daemon's socket), so a container, which has neither, must
// not get them.
var HostVars = []string{"LD_PRELOAD", "WSCHED_CUDA_LIMIT_BYTES", "WSCHED_SOCKET"}

// ForContainer is env without HostVars: a lease's environment as a
// container gets it (an LD_PRELOAD of a library the container lacks makes
// the loader complain at every exec there, and caps nothing).
func ForContainer(env map[string]string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		if !slices.Contains(HostVars, k) {
			out[k] = v
		}
	}
	return out
}
