#!/usr/bin/env bash
# monitor-deps.sh — installs what the monitor tests in `make test` need on a Debian host: Chromium for
# the monitor page test (daemon/monitor_test.go, driven by chromedp), promtool (Debian's prometheus
# package) for `promtool check metrics` and `promtool test rules`, tmux for the `wsched top` test, and
# setfacl (acl) for the tests of audio by path against a POSIX ACL (daemon/audiopath_test.go).
# Idempotent: installed packages are left alone. Only the host's own apt sources are used.
set -euo pipefail

deps_tag=monitor-deps
# shellcheck source=packaging/deps/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap apt_cleanup EXIT

apt_install chromium tmux acl
if has_candidate prometheus; then
	apt_install prometheus
else
	say "no prometheus package in this host's apt sources: the promtool checks will be skipped"
fi
report_installed
