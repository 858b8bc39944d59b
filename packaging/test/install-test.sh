#!/bin/sh
# install-test.sh DIST — installs the wsched packages from DIST into throwaway Debian roots and checks
# where everything landed. Needs root and the roots cached by packaging/deps/packaging-deps.sh.
#
# Why dpkg --root into a debootstrap root and not into an empty directory: dpkg --root runs the
# maintainer scripts chrooted into the root, so the root needs /bin/sh and the tools the scripts call
# (getent, useradd, systemd-sysusers, deb-systemd-helper). An empty directory can only take the files
# with --force-script-chrootless, which would run the scripts on the build host. A minimal Debian root
# runs them exactly as a container or an image build would, where systemd is not running:
#   minbase  no systemd at all: the useradd fallback, no systemd-tmpfiles
#   systemd  systemd installed but not PID 1: systemd-sysusers, systemd-tmpfiles, and a full unit
#            tree for `systemd-analyze verify --root`
set -eu

dist=${1:?usage: install-test.sh DIST}
cache=${PACKAGING_CACHE:-/var/cache/wsched-packaging}
suite=${PACKAGING_SUITE:-bookworm}
here=$(cd "$(dirname "$0")/.." && pwd)

wsched_deb=$(ls "$dist"/wsched_*.deb)
backend_debs=$(ls "$dist"/wsched-backend-*_*.deb 2>/dev/null || true)

fail() {
	echo "install-test: FAIL: $*" >&2
	exit 1
}

# check_root ROOT FLAVOUR runs the Go assertions on an installed root (packaging/installed_test.go).
check_root() {
	WSCHED_TEST_ROOT=$1 WSCHED_TEST_FLAVOUR=$2 go -C "$here" test -count=1 -run 'TestInstalledRoot' . >"$1.gotest" 2>&1 ||
		{
			cat "$1.gotest" >&2
			fail "$2: installed files do not match the units"
		}
	grep -q '^ok' "$1.gotest" || fail "$2: TestInstalledRoot did not run"
}

for flavour in minbase systemd; do
	tarball="$cache/$suite-$flavour.tar"
	[ -f "$tarball" ] || fail "$tarball missing: run make deps (packaging/deps/packaging-deps.sh)"
	root=$(mktemp -d "${TMPDIR:-/tmp}/wsched-root-$flavour.XXXXXX")
	trap 'rm -rf "$root" "$root.gotest" "$root.dpkg"' EXIT
	tar -C "$root" -xf "$tarball"
	echo "install-test: $flavour: dpkg --root=$root -i $(basename "$wsched_deb")"

	# First install, then the same package again (the postinst's upgrade path).
	dpkg --root="$root" -i "$wsched_deb" || fail "$flavour: dpkg -i failed"
	dpkg --root="$root" -i "$wsched_deb" || fail "$flavour: reinstall failed"
	check_root "$root" "$flavour"

	if [ "$flavour" = systemd ]; then
		# The installed units against the installed binary, sysinit.target and the rest of the
		# root's unit tree; systemd need not run. MANPATH lets the host's man(1) find the installed
		# wsched(1) that Documentation= names. verify exits 0 after warnings such as an unknown key
		# or a bad value, so any output at all is a failure.
		out=$(cd / && MANPATH="$root/usr/share/man" systemd-analyze verify --root="$root" \
			wsched.socket wsched.service 2>&1) || fail "systemd-analyze verify: $out"
		[ -z "$out" ] || fail "systemd-analyze verify warned: $out"
		echo "install-test: systemd: systemd-analyze verify --root: ok"
	fi

	# The backends: every dependency must be in the root already (bookworm's own packages; the
	# libraries bookworm lacks are in the packages), so plain dpkg -i, no --force-depends.
	for deb in $backend_debs; do
		name=$(dpkg-deb -f "$deb" Package)
		dpkg --root="$root" -i "$deb" >"$root.dpkg" 2>&1 || {
			cat "$root.dpkg" >&2
			fail "$flavour: $name: dpkg -i failed (a dependency bookworm lacks?)"
		}
		[ -x "$root/usr/lib/wsched/plugins/$name" ] || fail "$flavour: $name not in /usr/lib/wsched/plugins"
		dpkg --root="$root" -r "$name" >/dev/null || fail "$flavour: $name removal failed"
		[ ! -e "$root/usr/lib/wsched/lib/${name#wsched-backend-}" ] || fail "$flavour: $name left its libraries"
	done

	# Removal keeps the conffile, purge removes it and the state; neither may fail without systemd.
	mkdir -p "$root/var/lib/wsched" && touch "$root/var/lib/wsched/state.db"
	dpkg --root="$root" -r wsched || fail "$flavour: dpkg -r failed"
	[ ! -e "$root/usr/bin/wsched" ] || fail "$flavour: /usr/bin/wsched left after removal"
	[ -f "$root/etc/wsched/wsched.toml" ] || fail "$flavour: conffile removed by dpkg -r"
	dpkg --root="$root" -P wsched || fail "$flavour: dpkg -P failed"
	[ ! -e "$root/etc/wsched/wsched.toml" ] || fail "$flavour: conffile left after purge"
	[ ! -e "$root/var/lib/wsched" ] || fail "$flavour: /var/lib/wsched left after purge"
	[ ! -e "$root/etc/systemd/system/sockets.target.wants/wsched.socket" ] ||
		fail "$flavour: socket still enabled after purge"

	rm -rf "$root" "$root.gotest" "$root.dpkg"
	trap - EXIT
	echo "install-test: $flavour: ok"
done
