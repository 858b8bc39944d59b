package main

import (
	"slices"
	"testing"

	"github.com/wsched/wsched/daemon/client"
	"github.com/wsched/wsched/internal/config"
)

// TestSocketCandidates: a user who configured no socket tries their own
// daemon's and then the system daemon's; anything configured is used alone.
func TestSocketCandidates(t *testing.T) {
	const xdg = "/run/user/1000"
	perUser := config.DefaultSocket(false, xdg)
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name     string
		resolved string
		flag     string
		getenv   func(string) string
		uid      int
		want     []string
	}{
		{"nothing configured", perUser, "", env("XDG_RUNTIME_DIR", xdg), 1000, []string{perUser, client.SystemSocket}},
		{"nothing configured, no XDG_RUNTIME_DIR", config.DefaultSocket(false, ""), "", env(), 1000,
			[]string{config.DefaultSocket(false, ""), client.SystemSocket}},
		{"--socket", "/srv/s.sock", "/srv/s.sock", env("XDG_RUNTIME_DIR", xdg), 1000, []string{"/srv/s.sock"}},
		{"WSCHED_SOCKET", "/srv/s.sock", "", env("XDG_RUNTIME_DIR", xdg, "WSCHED_SOCKET", "/srv/s.sock"), 1000, []string{"/srv/s.sock"}},
		{"WSCHED_SOCKET naming the per-user path", perUser, "", env("XDG_RUNTIME_DIR", xdg, "WSCHED_SOCKET", perUser), 1000, []string{perUser}},
		{"[daemon] socket in the file", "/srv/s.sock", "", env("XDG_RUNTIME_DIR", xdg), 1000, []string{"/srv/s.sock"}},
		{"root", client.SystemSocket, "", env(), 0, []string{client.SystemSocket}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := socketCandidates(tc.resolved, tc.flag, tc.getenv, tc.uid); !slices.Equal(got, tc.want) {
				t.Errorf("socketCandidates = %q, want %q", got, tc.want)
			}
		})
	}
}
