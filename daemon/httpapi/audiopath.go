package httpapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/daemon/api"
)

// restrictedRoots hold no audio: kernel and device files, which a daemon
// running as root must never read for a client (its own /proc/self/maps,
// say) nor open (a device's open may act).
var restrictedRoots = []string{"/proc", "/sys", "/dev"}

// restrictedFS are the magic numbers of kernel file systems refused
// wherever they are mounted.
var restrictedFS = map[int64]string{
	unix.PROC_SUPER_MAGIC: "procfs", unix.SYSFS_MAGIC: "sysfs", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.DEBUGFS_MAGIC: "debugfs", unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs",
	unix.CGROUP_SUPER_MAGIC: "cgroupfs", unix.CGROUP2_SUPER_MAGIC: "cgroup2fs", unix.BPF_FS_MAGIC: "bpffs",
}

func underRestricted(real string) (string, bool) {
	for _, root := range restrictedRoots {
		if real == root || strings.HasPrefix(real, root+"/") {
			return root, true
		}
	}
	return "", false
}

// snapshotAudio takes audio a client named by path. The path is resolved
// and opened with the client's own credentials (asCreds: the kernel checks
// mode bits, ACLs and every directory on the way, for the client), never
// under /proc, /sys or /dev, and must be a regular file; the opened file is
// copied into the spool, and the job reads the copy, so swapping the path
// later changes nothing. Refusals are 400 (not audio) or 403 (not the
// client's to read).
func (s *Server) snapshotAudio(peer Peer, path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", badRequest("invalid_field", "field audio_path: %q is not an absolute path", path)
	}
	f, err := s.openAsPeer(peer, path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := checkAudioFile(f, path); err != nil {
		return "", err
	}
	return s.saveUpload(namedReader{f, filepath.Base(f.Name())}, int64(s.cfg.Jobs.MaxUpload))
}

// snapshotPassed takes the audio a client passed as an open file with the
// request (api.AudioFDHeader): the one descriptor its connection received,
// readable, a regular file on no kernel file system, copied into the spool
// from its start.
func (s *Server) snapshotPassed(r *http.Request, peer Peer) (string, error) {
	files := passedFiles(r.Context())
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	name := filepath.Base(r.Header.Get(api.AudioFDHeader))
	switch {
	case !peer.Known:
		return "", badRequest("invalid_request", "%s needs the Unix socket", api.AudioFDHeader)
	case len(files) != 1:
		return "", badRequest("invalid_request", "%s: want one descriptor passed with the request's first bytes (SCM_RIGHTS), got %d", api.AudioFDHeader, len(files))
	}
	f := files[0]
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE == unix.O_WRONLY || fl&unix.O_PATH != 0 {
		return "", badRequest("invalid_request", "%s: the passed descriptor is not open for reading", api.AudioFDHeader)
	}
	if err := checkAudioFile(f, name); err != nil {
		return "", err
	}
	from := io.NewSectionReader(f, 0, math.MaxInt64) // pread: the shared file offset does not matter
	return s.saveUpload(namedReader{from, name}, int64(s.cfg.Jobs.MaxUpload))
}

// openAsPeer resolves and opens path as the peer: with the peer's
// credentials where the daemon may take them (root), directly where the
// peer is the daemon's own user or root, and not at all otherwise.
func (s *Server) openAsPeer(peer Peer, path string) (*os.File, error) {
	open := func() (*os.File, error) { return resolveAndOpen(path) }
	euid := os.Geteuid()
	switch {
	case peer.UID == euid || peer.IsRoot():
		return open()
	case euid != 0:
		return nil, forbidden("audio_path: the daemon (uid %d) cannot open files as uid %d; upload the file or pass it with `wsched transcribe`", euid, peer.UID)
	}
	f, err := asCreds(creds{UID: peer.UID, GID: peer.GID, Groups: peerGIDs(s.procRoot, peer)}, open)
	return f, err
}

// resolveAndOpen resolves symlinks, refuses kernel file systems, and opens
// the result read-only with no symlink on the way (a swap after the
// resolution fails), without blocking on a FIFO.
func resolveAndOpen(path string) (*os.File, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, pathError(path, err)
	}
	if root, bad := underRestricted(real); bad {
		return nil, badRequest("invalid_field", "field audio_path: %s is under %s, which holds no audio", path, root)
	}
	f, err := openNoFollow(real)
	if err != nil {
		return nil, pathError(path, err)
	}
	return f, nil
}

// checkAudioFile checks the opened file: regular, on no kernel file system.
func checkAudioFile(f *os.File, path string) error {
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return badRequest("invalid_field", "field audio_path: %s is not a regular file", path)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	if name, bad := restrictedFS[int64(sfs.Type)]; bad {
		return badRequest("invalid_field", "field audio_path: %s is on %s, which holds no audio", path, name)
	}
	return nil
}

// pathError maps a failed resolve or open: permission → 403, the rest 400.
func pathError(path string, err error) error {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return err
	case errors.Is(err, fs.ErrPermission):
		return forbidden("audio_path: %s: you may not read it (%v)", path, unwrapPath(err))
	case errors.Is(err, unix.ELOOP):
		return forbidden("audio_path: %s changed while it was opened", path)
	}
	return badRequest("invalid_field", "field audio_path: %s: %v", path, unwrapPath(err))
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// openNoFollow opens path read-only with no symlink anywhere on the way
// (openat2 RESOLVE_NO_SYMLINKS; O_NOFOLLOW on kernels before 5.6), without
// blocking on a FIFO.
func openNoFollow(path string) (*os.File, error) {
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_NOCTTY, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// namedReader gives saveUpload the file name (for its extension).
type namedReader struct {
	io.Reader
	name string
}

func (n namedReader) FileName() string { return n.name }
