package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/testtmp"
)

// TestWatchTellsCreateFromDelete: the directory watch reports a socket's
// creation and its removal as such, in order.
func TestWatchTellsCreateFromDelete(t *testing.T) {
	dir := testtmp.ShortDir(t)
	w, err := watchDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan dirEvent, 16)
	go w.read(ctx, events)
	defer w.Close()
	kl := startKubelet(t, dir) // kubelet.sock created
	kl.srv.Stop()              // and removed (the listener unlinks it)
	want := []dirEvent{{"kubelet.sock", true}, {"kubelet.sock", false}}
	var got []dirEvent
	timeout := time.After(deadline)
	for len(got) < len(want) {
		select {
		case ev := <-events:
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestRegisterOncePerKubeletSocket: repeated events for one kubelet.sock
// register once; a new kubelet.sock (the kubelet restarted) once more.
func TestRegisterOncePerKubeletSocket(t *testing.T) {
	dir := testtmp.ShortDir(t)
	p, err := New(Options{Daemon: noDaemon{}, Log: testshared.Logger(t), Unit: GiB, PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var reg registration
	p.registerOnce(ctx, &reg) // no kubelet yet: nothing to register with
	kl := startKubelet(t, dir)
	for range 3 {
		p.registerOnce(ctx, &reg)
	}
	if n := kl.registrations(); n != 1 {
		t.Fatalf("registrations with one kubelet.sock: %d, want 1", n)
	}
	// The kubelet restarts: its socket goes and a new one comes. (A real
	// restart takes far longer than the clock tick that tells the sockets'
	// change times apart even where the inode number is reused.)
	kl.srv.Stop()
	time.Sleep(20 * time.Millisecond)
	p.registerOnce(ctx, &reg) // a late event: the old socket is gone
	kl2 := startKubelet(t, dir)
	for range 3 {
		p.registerOnce(ctx, &reg)
	}
	if n := kl2.registrations(); n != 1 {
		t.Fatalf("registrations with the new kubelet.sock: %d, want 1", n)
	}
	// Serving again (a new endpoint) starts a new registration record.
	var fresh registration
	p.registerOnce(ctx, &fresh)
	if n := kl2.registrations(); n != 2 {
		t.Fatalf("registrations after serving again: %d, want 2", n)
	}
}

// TestRegisterRecordsTheSocketAfterDialling: a restarting kubelet replaces
// kubelet.sock while the plugin registers; the plugin records the socket
// there after registering, so the new socket's create event does not make
// it register a second time.
func TestRegisterRecordsTheSocketAfterDialling(t *testing.T) {
	dir := testtmp.ShortDir(t)
	p, err := New(Options{Daemon: noDaemon{}, Log: testshared.Logger(t), Unit: GiB, PluginDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	kl := startKubelet(t, dir)
	before, _ := statSocket(filepath.Join(dir, "kubelet.sock"))
	var kl2 *fakeKubelet
	kl.onRegister = func() {
		time.Sleep(20 * time.Millisecond) // a new change time, even for a reused inode
		if err := os.Remove(filepath.Join(dir, "kubelet.sock")); err != nil {
			t.Error(err)
		}
		kl2 = startKubelet(t, dir)
	}
	var reg registration
	p.registerOnce(context.Background(), &reg)
	after, _ := statSocket(filepath.Join(dir, "kubelet.sock"))
	if reg.sock != after || reg.sock == before {
		t.Fatalf("recorded %+v; before %+v, after %+v: want the socket there after registering", reg.sock, before, after)
	}
	p.registerOnce(context.Background(), &reg) // the create event of the new socket
	if n := kl2.registrations(); n != 0 {
		t.Fatalf("%d more registrations after the socket changed under the first, want 0", n)
	}
}

// TestKubeletRestartRegistersOnce: the real kubelet's restart — plugin
// sockets removed, kubelet.sock removed and created again — ends in exactly
// one registration with the new kubelet, however the events interleave.
func TestKubeletRestartRegistersOnce(t *testing.T) {
	n, _ := startNode(t)
	for i := range 3 {
		n.kl.srv.Stop() // the old kubelet is gone (kubelet.sock unlinked) ...
		if err := os.Remove(filepath.Join(n.dir, Endpoint)); err != nil {
			t.Fatal(err) // ... the new one cleans the plugin directory ...
		}
		n.kl = startKubelet(t, n.dir) // ... and listens on a new kubelet.sock
		if reg := n.kl.registered(t); reg.ResourceName != ResourceName {
			t.Fatalf("restart %d: registration = %v", i, reg)
		}
		waitFor(t, "plugin socket back", func() bool { return exists(filepath.Join(n.dir, Endpoint)) })
		// Late and repeated events arrive within the plugin's next few
		// event reads; give them ample time to show.
		time.Sleep(200 * time.Millisecond)
		if got := n.kl.registrations(); got != 1 {
			t.Fatalf("restart %d: %d registrations with the new kubelet, want 1", i, got)
		}
	}
}

// noDaemon is a Daemon for tests that never reach it.
type noDaemon struct{ Daemon }
