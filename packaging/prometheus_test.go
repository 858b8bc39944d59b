package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPrometheusRules runs `promtool check rules` and `promtool test rules`
// (one test per alert) on the shipped rules; it skips without promtool
// (Debian's prometheus package; make deps installs it).
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: make deps installs Debian's prometheus package")
	}
	for _, args := range [][]string{{"check", "rules", "wsched-rules.yml"}, {"test", "rules", "wsched-rules.test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestRulesAllTested checks every alert of wsched-rules.yml has a test.
func TestRulesAllTested(t *testing.T) {
	rules, err := os.ReadFile(filepath.Join("prometheus", "wsched-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("prometheus", "wsched-rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) < 7 {
		t.Fatalf("%d alerts in wsched-rules.yml, want the seed's three plus overrun, unhealthy GPU, daemon down, estimate misses", len(alerts))
	}
	for _, a := range alerts {
		if !strings.Contains(string(tests), "alertname: "+a[1]+"\n") {
			t.Errorf("alert %s has no test in wsched-rules.test.yml", a[1])
		}
	}
}

// TestGrafanaDashboard checks the dashboard is JSON with panels that query
// wsched's metrics.
func TestGrafanaDashboard(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("prometheus", "wsched-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("wsched-dashboard.json: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard: uid %q, %d panels", d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "wsched_") {
				t.Errorf("panel %q queries %q: no wsched metric", p.Title, tg.Expr)
			}
		}
	}
}
