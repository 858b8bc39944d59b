# mk/monitor.mk — the monitor page, `wsched top`, metrics and alert rules (issue 16).
#
#   make monitor-deps        chromium, tmux, acl (setfacl) and promtool (Debian's prometheus) from the host's apt
#                            sources (packaging/deps/monitor-deps.sh); part of `make deps`
#   make prometheus-rules-test  promtool check/test rules on packaging/prometheus (part of `make test`)
#   make monitor-screenshot  re-runs the Chromium test and saves its 1280×800 screenshot to
#                            docs/img/monitor.png (the README shows it)
#
# The Chromium test (daemon/monitor_test.go) and the tmux test of `wsched top` (cmd/wsched/top_test.go)
# run in `make gotest`; each skips, saying why, when chromium or tmux is missing.
.PHONY: monitor-deps monitor-screenshot
deps: monitor-deps

monitor-deps:
	bash packaging/deps/monitor-deps.sh

monitor-screenshot:
	WSCHED_MONITOR_SCREENSHOT=$(CURDIR)/docs/img/monitor.png $(GO) test -count=1 -run '^TestMonitorPageLive$$' ./daemon/

# The alerting rules: promtool check rules + promtool test rules (one test per alert), and the Grafana
# dashboard's shape; Go tests of the packaging module (packaging/prometheus_test.go), which skip
# without promtool.
.PHONY: prometheus-rules-test
test: prometheus-rules-test

prometheus-rules-test:
	cd packaging && $(GO) test -count=1 -run '^(TestPrometheusRules|TestRulesAllTested|TestGrafanaDashboard)$$' .
