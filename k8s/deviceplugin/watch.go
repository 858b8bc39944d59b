package deviceplugin

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// dirEvent is one name created (or moved in) or removed (or moved out) in
// the watched directory.
type dirEvent struct {
	name    string
	created bool
}

// dirWatch reports names created or removed in one directory (inotify).
type dirWatch struct{ f *os.File }

const (
	inCreated = unix.IN_CREATE | unix.IN_MOVED_TO
	inRemoved = unix.IN_DELETE | unix.IN_MOVED_FROM
)

func watchDir(dir string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("watch %s: inotify: %w", dir, err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, inCreated|inRemoved); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch %s: %w", dir, err)
	}
	// A non-blocking descriptor goes to the runtime poller: Close ends a
	// pending Read.
	return &dirWatch{f: os.NewFile(uintptr(fd), "inotify:"+dir)}, nil
}

// Close stops the watch.
func (w *dirWatch) Close() error { return w.f.Close() }

// read sends each event to events until the watch is closed or ctx ends,
// then closes events.
func (w *dirWatch) read(ctx context.Context, events chan<- dirEvent) {
	defer close(events)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		for _, ev := range parseEvents(buf[:n]) {
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}
}

// parseEvents decodes a read of inotify events; events on the directory
// itself (no name) and of other kinds are left out.
func parseEvents(buf []byte) []dirEvent {
	var out []dirEvent
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		mask := binary.NativeEndian.Uint32(buf[off+4 : off+8])
		nameLen := int(binary.NativeEndian.Uint32(buf[off+12 : off+16]))
		start := off + unix.SizeofInotifyEvent
		name := strings.TrimRight(string(buf[start:min(start+nameLen, len(buf))]), "\x00")
		off = start + nameLen
		if name == "" || mask&(inCreated|inRemoved) == 0 {
			continue
		}
		out = append(out, dirEvent{name: name, created: mask&inCreated != 0})
	}
	return out
}
