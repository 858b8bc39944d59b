// Package chromiumtest runs headless Chromium for the tests that look at the
// monitor page as a person would: Debian's chromium (make deps installs it),
// a fresh profile, kept off the network, closed and removed when the test
// ends.
package chromiumtest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Path finds chromium ($WSCHED_CHROMIUM, chromium, chromium-browser), or
// skips the test saying how to install it.
func Path(t testing.TB) string {
	t.Helper()
	for _, name := range []string{os.Getenv("WSCHED_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium not found: `make deps` installs it (apt-get install chromium); the test needs a real browser")
	return ""
}

// Start starts the browser with a window of width×height and returns its
// tab, bounded to 2 minutes.
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	path := Path(t)
	profile, err := os.MkdirTemp("", "c") // short: Chromium puts its SingletonSocket under it (107-byte socket paths)
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(profile), chromedp.Env("TMPDIR=" + profile), chromedp.WindowSize(width, height),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		if err := os.RemoveAll(profile); err != nil {
			t.Errorf("remove chromium profile: %v", err)
		}
	})
	// The first call starts the browser and must not carry a deadline (it
	// would end the browser); the later ones are bounded.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(tab, 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
