package deviceplugin

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// dirWatch reports names created or removed in one directory (inotify).
type dirWatch struct{ f *os.File }

func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: inotify: %w", dir, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_TO|unix.IN_MOVED_FROM); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// A non-blocking descriptor goes to the runtime poller: Close ends a
	// pending Read.
	return &dirWatch{f: os.NewFile(uintptr(fd), "inotify:"+dir)}, nil
}

// Close stops the watch.
func (w *dirWatch) Close() error { return w.f.Close() }

// read sends the name of each event to names until the watch is closed or
// ctx ends, then closes names.
func (w *dirWatch) read(ctx context.Context, names chan<- string) {
	defer close(names)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12 : off+16]))
			start := off + unix.SizeofInotifyEvent
			name := strings.TrimRight(string(buf[start:min(start+nameLen, n)]), "\x00")
			off = start + nameLen
			select {
			case names <- name:
			case <-ctx.Done():
				return
			}
		}
	}
}
