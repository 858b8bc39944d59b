package fdpass

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testtmp"
)

// pair is a connected client (Sender of file) and accepted server conn.
func pair(t *testing.T, file *os.File) (*Sender, net.Conn) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(testtmp.ShortDir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fl := Listen(ln)
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := fl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return NewSender(c.(*net.UnixConn), file), s
}

// TestPassedFileArrivesWithTheFirstBytes: the receiver holds the sent file
// (the same open file: it reads its content) once it read the first bytes;
// later writes carry nothing; taking empties the list.
func TestPassedFileArrivesWithTheFirstBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.wav")
	if err := os.WriteFile(path, []byte("RIFF-passed"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	snd, rcv := pair(t, f)
	for _, msg := range []string{"POST / HTTP/1.1\r\n", "more"} {
		if _, err := snd.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(rcv, buf); err != nil || string(buf) != msg {
			t.Fatalf("read %q, %v; want %q", buf, err, msg)
		}
	}
	r := FromConn(rcv)
	if r == nil {
		t.Fatal("the accepted connection is no Receiver")
	}
	files := r.TakeFiles()
	if len(files) != 1 {
		t.Fatalf("received %d files, want 1", len(files))
	}
	defer files[0].Close()
	got, err := io.ReadAll(io.NewSectionReader(files[0], 0, 1<<20))
	if err != nil || string(got) != "RIFF-passed" {
		t.Errorf("the passed file reads %q, %v", got, err)
	}
	if again := r.TakeFiles(); len(again) != 0 {
		t.Errorf("TakeFiles twice gave %d files", len(again))
	}
}

// TestUnclaimedFilesAreClosed: files nobody took are closed with the
// connection, and no more than MaxFiles are kept.
func TestUnclaimedFilesAreClosed(t *testing.T) {
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, rcv := pair(t, f)
	cl := rcv.(*conn)
	var kept []*os.File
	for range MaxFiles + 2 {
		dup, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, dup)
	}
	cl.keep(kept)
	if n := len(cl.files); n != MaxFiles {
		t.Errorf("kept %d files, want MaxFiles = %d", n, MaxFiles)
	}
	if _, err := kept[MaxFiles].Stat(); err == nil {
		t.Error("a file past MaxFiles is still open")
	}
	rcv.Close()
	if _, err := kept[0].Stat(); err == nil {
		t.Error("an unclaimed file outlived its connection")
	}
}

func TestMain(m *testing.M) { os.Exit(testtmp.Run(m.Run)) }

// TestReadDeadline: a read past its deadline reports 0 bytes and
// os.ErrDeadlineExceeded, as net.Conn does (bufio panics on recvmsg's -1).
func TestReadDeadline(t *testing.T) {
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, rcv := pair(t, f)
	_ = rcv.SetReadDeadline(time.Now().Add(50 * time.Millisecond)) // recvmsg runs, then the poller times out
	n, err := rcv.Read(make([]byte, 16))
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Read past the deadline = %d, %v; want 0, deadline exceeded", n, err)
	}
}
