package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsched/wsched/daemon/client"
)

// monitorCookie names the session cookie the one-time token is exchanged for.
const monitorCookie = "wsched_monitor"

func newMonitorCmd(a *app) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Serve the daemon's monitor page on a loopback port, for a browser on this machine",
		Long: `monitor serves the daemon's monitor page (what the Unix socket serves at /) on a
loopback TCP port and prints a URL with a one-time token. Opening it exchanges the
token for an HttpOnly, SameSite=Strict cookie; the token then stops working, and
every request without the cookie gets 401. Only the page, its assets and its live
stream (GET /v1/monitor/events) are passed to the daemon, as this user. Ctrl-C
stops it. For a browser elsewhere: ssh -L PORT:127.0.0.1:PORT, then the URL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.monitor(cmd.Context(), listen)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "loopback address to serve on (port 0: any free port)")
	return cmd
}

func (a *app) monitor(ctx context.Context, listen string) error {
	if err := loopbackOnly(listen); err != nil {
		return err
	}
	c, _, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Status(ctx); err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("monitor: listen on %s: %w", listen, err)
	}
	g, err := newMonitorGate(l.Addr().String())
	if err != nil {
		l.Close()
		return err
	}
	srv := &http.Server{Handler: g.wrap(socketProxy(c.Socket())), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(a.out, "wsched monitor: open http://%s/?token=%s (the token works once; Ctrl-C stops)\n", l.Addr(), g.token)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return fmt.Errorf("monitor: serve: %w", err)
	case <-ctx.Done():
		srv.Close() // ends the live streams too
		<-done
		return nil
	}
}

// loopbackOnly refuses an address a browser on another machine could reach:
// the cookie is the only guard.
func loopbackOnly(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("monitor: --listen %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("monitor: --listen %q: want a loopback address (127.0.0.1, [::1]); for another machine use ssh -L", listen)
	}
	return nil
}

// socketProxy passes requests to the daemon's Unix socket unchanged, and its
// answers back as they come: the event stream is flushed frame by frame
// and never parsed here.
func socketProxy(socket string) http.Handler {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: client.DialTimeout}
			return d.DialContext(ctx, "unix", socket)
		},
		IdleConnTimeout: 30 * time.Second,
	}
	return &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "wsched"})
			r.Out.Header.Del("Cookie") // the session is this process's business, not the daemon's
			r.Out.Header.Del("Authorization")
		},
	}
}

// monitorGate is the browser's way in: a one-time token in the URL, then a
// session cookie. The token and session are fixed at start; the only
// mutable state is whether the token was used (an atomic flag).
type monitorGate struct {
	addr    string // host:port the browser must name (no DNS rebinding)
	token   string
	session string
	used    atomic.Bool
}

func newMonitorGate(addr string) (*monitorGate, error) {
	token, err := randomString()
	if err != nil {
		return nil, err
	}
	session, err := randomString()
	if err != nil {
		return nil, err
	}
	return &monitorGate{addr: addr, token: token, session: session}, nil
}

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("monitor: random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// monitorPath: what the page needs: itself, its assets, its stream.
func monitorPath(p string) bool {
	return p == "/" || strings.HasPrefix(p, "/ui/") || p == "/v1/monitor/events"
}

func (g *monitorGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := net.SplitHostPort(g.addr)
		if r.Host != g.addr && r.Host != "localhost:"+port {
			http.Error(w, "wrong Host", http.StatusMisdirectedRequest)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" {
			g.exchange(w, r, tok)
			return
		}
		if ck, err := r.Cookie(monitorCookie); err != nil || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(g.session)) != 1 {
			unauthorized(w, "open the URL `wsched monitor` printed")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		if !monitorPath(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// exchange turns the token, once, into the session cookie and sends the
// browser on to the page without the token in its address bar.
func (g *monitorGate) exchange(w http.ResponseWriter, r *http.Request, tok string) {
	if subtle.ConstantTimeCompare([]byte(tok), []byte(g.token)) != 1 {
		unauthorized(w, "wrong token")
		return
	}
	if !g.used.CompareAndSwap(false, true) {
		unauthorized(w, "this token was used already: restart `wsched monitor` for a new one")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: monitorCookie, Value: g.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "401 unauthorized: "+why, http.StatusUnauthorized)
}
