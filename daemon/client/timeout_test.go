package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/asuser"
	"github.com/wsched/wsched/internal/testtmp"
)

func TestMain(m *testing.M) {
	switch asuser.Helper() {
	case "health":
		fmt.Println(New(os.Args[1]).Health(context.Background()))
		os.Exit(0)
	case "discover":
		fmt.Println(Discover("wsched", os.Args[1:]...).Health(context.Background()))
		os.Exit(0)
	}
	os.Exit(testtmp.Main(m))
}

// stoppedDaemon accepts connections and never answers, as a daemon stopped
// with SIGSTOP does (the kernel still accepts into the backlog).
func stoppedDaemon(t *testing.T) string {
	socket := filepath.Join(testtmp.ShortDir(t), "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	return socket
}

func TestNoHangOnStoppedDaemon(t *testing.T) {
	c := New(stoppedDaemon(t))
	defer c.Close()
	c.SetTimeout(200 * time.Millisecond)
	calls := map[string]func() error{
		"health": func() error { return c.Health(context.Background()) },
		"events": func() error {
			return c.Events(context.Background(), func(api.Event) error { return nil })
		},
	}
	for name, call := range calls {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNoAnswer) {
				t.Errorf("%s: %v, want ErrNoAnswer", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waits for a stopped daemon", name)
		}
	}
}

func TestPermissionDeniedSaysJoinGroup(t *testing.T) {
	dir := asuser.Dir(t)
	socket := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(socket, 0o660); err != nil {
		t.Fatal(err)
	}
	out, err := asuser.Command(context.Background(), t, dir, "health", socket).CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "join group wsched") {
		t.Errorf("uid %d on a 0660 root socket: %s; want advice to join group wsched", asuser.Nobody, out)
	}
}
