package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsched/wsched/placement"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// fill writes a file until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, unix.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// TestDiskFullReleasesWritten (issue 25 item 6): on a full disk a grant
// fails, every release is still written (the journal keeps room for
// them), and none comes back after a crash or a stop.
func TestDiskFullReleasesWritten(t *testing.T) {
	dir := smallDisk(t, "8m")
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 20 {
		l := lease("l-" + string(rune('a'+i)))
		all = append(all, l.ID)
		if err := db.PutLease(l); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, dir)
	for i := 0; ; i++ { // grants use the journal's room until only the deletion reserve is left
		l := lease(fmt.Sprintf("l-full-%05d", i))
		if err := db.PutLease(l); err != nil {
			break
		}
		if i == 100_000 {
			t.Fatal("grants never failed on a full disk")
		}
		all = append(all, l.ID)
	}
	slices.Sort(all)
	for _, id := range all[:len(all)-10] {
		if err := db.DeleteLease(id); err != nil {
			t.Fatalf("release %s on a full disk: %v", id, err)
		}
	}
	want := all[len(all)-10:]
	crashed, err := Open(crashCopy(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, crashed); !slices.Equal(got, want) {
		t.Errorf("after a crash: %v, want %v", got, want)
	}
	crashed.Close()
	_ = db.Close() // the fold fails on the full disk; the journal keeps everything
	db, err = Open(dir)
	if err != nil {
		t.Fatalf("open on the full disk after a stop: %v", err)
	}
	defer db.Close()
	if got := ids(t, db); !slices.Equal(got, want) {
		t.Errorf("after a stop: %v, want %v", got, want)
	}
	for _, id := range want { // and releases still work after the restart
		if err := db.Apply([]placement.Change{{Delete: id}}); err != nil {
			t.Fatalf("release %s after the restart on a full disk: %v", id, err)
		}
	}
}
