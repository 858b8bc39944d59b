#!/usr/bin/env bash
# packaging-deps.sh — installs what `make packaging-test` needs on a Debian host and builds the cached
# throwaway roots the install test unpacks the .deb into. Idempotent: installed packages and existing
# caches are left alone. Run as root (make deps does).
#
#   systemd      systemd-analyze (unit verification) and systemd-socket-activate; neither needs systemd
#                running as PID 1
#   lintian      checks the built .deb files
#   debootstrap  builds the minimal Debian roots used by the install test (and the systemd test's)
#   systemd-container  systemd-nspawn, which boots the systemd test's root (make systemd-test)
#
# Environment: PACKAGING_CACHE (default /var/cache/wsched-packaging), PACKAGING_SUITE (default
# bookworm, the oldest Debian the package supports), PACKAGING_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

deps_tag=packaging-deps
# shellcheck source=packaging/deps/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
trap apt_cleanup EXIT

cache=${PACKAGING_CACHE:-/var/cache/wsched-packaging}
suite=${PACKAGING_SUITE:-bookworm}
mirror=${PACKAGING_MIRROR:-http://deb.debian.org/debian}

apt_install systemd lintian debootstrap systemd-container
report_installed

# Two roots, cached as tarballs: "minbase" has no systemd at all (a minimal container), "systemd" has the
# systemd package installed but not running (a chroot or an image being built). The install test puts the
# .deb into a fresh copy of each.
mkdir -p "$cache"
minbase="$cache/$suite-minbase.tar"
withsystemd="$cache/$suite-systemd.tar"
if [ -f "$minbase" ] && [ -f "$withsystemd" ]; then
	echo "packaging-deps: cached roots present in $cache"
	exit 0
fi

work=$(mktemp -d "${cache}/debootstrap.XXXXXX")
trap 'rm -rf "$work"; apt_cleanup' EXIT
echo "packaging-deps: debootstrap --variant=minbase $suite (a few minutes, once)"
debootstrap --variant=minbase "$suite" "$work/root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log" >&2
	exit 1
}
tar -C "$work/root" -cf "$minbase.partial" . && mv "$minbase.partial" "$minbase"

echo "packaging-deps: adding systemd to the second root"
cp /etc/resolv.conf "$work/root/etc/resolv.conf"
chroot "$work/root" apt-get update -q >"$work/apt.log" 2>&1
DEBIAN_FRONTEND=noninteractive chroot "$work/root" apt-get install -y -q --no-install-recommends systemd \
	>>"$work/apt.log" 2>&1 || {
	tail -n 30 "$work/apt.log" >&2
	exit 1
}
chroot "$work/root" apt-get clean
tar -C "$work/root" -cf "$withsystemd.partial" . && mv "$withsystemd.partial" "$withsystemd"
echo "packaging-deps: cached roots written to $cache"
