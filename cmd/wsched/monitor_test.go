package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/internal/chromiumtest"
)

// browser runs headless Chromium with a fresh profile (chromiumtest); it
// skips when there is no Chromium.
func browser(t *testing.T) context.Context {
	t.Helper()
	return chromiumtest.Start(t, 1280, 800)
}

// startMonitor runs `wsched monitor` and returns the URL it printed.
func startMonitor(t *testing.T, e *e2e) string {
	t.Helper()
	cmd := e.wsched("monitor")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case s := <-line:
		u := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=[A-Za-z0-9_-]{43}`).FindString(s)
		if u == "" {
			t.Fatalf("wsched monitor printed %q, want a URL with a token (stderr: %s)", s, stderr.String())
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("wsched monitor printed no URL within 30 s (stderr: %s)", stderr.String())
		return ""
	}
}

// TestMonitorInBrowser is issue 22's person at the box: the daemon runs,
// `wsched monitor` prints a URL, the browser opens it and shows the GPU,
// and a lease granted afterwards appears without a reload. The token works
// once; the cookie it becomes is HttpOnly and SameSite=Strict; anything
// without the cookie is 401, and only the page and its stream are passed on.
func TestMonitorInBrowser(t *testing.T) {
	ctx := browser(t)
	e := newE2E(t)
	e.serve()
	link := startMonitor(t, e)
	u, _ := url.Parse(link)
	base := "http://" + u.Host

	if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#conn.live")),
		chromedp.WaitVisible(chromedp.CSS("#gpu-0 .bar"))); err != nil {
		t.Fatalf("open the printed URL: %v", err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`)); err != nil || loc != base+"/" {
		t.Errorf("address bar %q (%v), want %s/ without the token", loc, err, base)
	}
	c := e.client()
	defer c.Close()
	l, err := c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 8 * GiB, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	poll := fmt.Sprintf(`!!document.querySelector('#gpu-0 li[data-lease="%s"]')`, l.ID)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](poll, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
		t.Fatalf("the lease never appeared on the page: %v", err)
	}

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, ck := range cookies.Cookies {
		if ck.Name == monitorCookie {
			session = ck
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie %+v, want HttpOnly and SameSite=Strict", session)
	}
	if js, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); js != "" {
		t.Errorf("page scripts see the cookie: %q", js)
	}

	get := func(path, cookie string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: monitorCookie, Value: cookie})
		}
		hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, cookie string
		want         int
	}{
		{"/" + "?" + u.RawQuery, "", http.StatusUnauthorized}, // the token again
		{"/?token=" + strings.Repeat("A", 43), "", http.StatusUnauthorized},
		{"/", "", http.StatusUnauthorized},
		{"/v1/monitor/events", "", http.StatusUnauthorized},
		{"/", "not-the-session", http.StatusUnauthorized},
		{"/", session.Value, http.StatusOK},
		{"/v1/leases", session.Value, http.StatusNotFound}, // leases stay on the Unix socket
	} {
		if got := get(tc.path, tc.cookie); got != tc.want {
			t.Errorf("GET %s (cookie %t): %d, want %d", tc.path, tc.cookie != "", got, tc.want)
		}
	}
}

// TestMonitorListenLoopbackOnly: the cookie is the only guard, so the page
// is never served where another machine could reach it.
func TestMonitorListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:8080", ":8080"} {
		_, _, err := runCLI(t, nil, "monitor", "--listen", addr)
		if err == nil || !strings.Contains(err.Error(), "want a loopback address") {
			t.Errorf("--listen %s: %v", addr, err)
		}
	}
}
