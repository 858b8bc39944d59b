#!/usr/bin/env bash
# install-deps.sh — install what the whisper.cpp backend needs to build and run.
#
#   * libwhisper-dev + libggml-dev (whisper.cpp 1.9.5 / ggml as packaged by Debian):
#       straight from the configured sources when they have them (sid, testing);
#       otherwise, on Debian 12 and 13 (neither has whisper.cpp), from sid as a
#       pinned partial upgrade: sid source + apt pin 100, then
#       `apt-get install -t sid`, which upgrades libc6 and friends.
#   * an empty stub libggml-cpu.so in /usr/local/lib: the Go bindings link
#     `-lggml-cpu` unconditionally, but Debian's ggml loads its CPU backend as a
#     dynamic module and ships no libggml-cpu.so. Consumers link with
#     `-Wl,--as-needed`, so the stub never becomes a runtime dependency.
#   * the build tools cgo needs (gcc, g++, pkg-config) and systemd-analyze
#     (package systemd) when missing, and ffmpeg and curl, which the tests use
#     (the backend's ffmpeg path and its playlist refusal; curl as an API
#     client). At run time ffmpeg stays optional.
#
# Idempotent: every step checks first and does nothing when already satisfied,
# so a second run prints a single line. Runs as root, or through sudo.
#
# Environment:
#   WSCHED_DEBIAN_MIRROR  mirror for the sid source (Debian 12/13)
#                         (default http://deb.debian.org/debian)
#   WSCHED_STUB_DIR       where the libggml-cpu stub goes (default /usr/local/lib)
set -euo pipefail

readonly MIRROR="${WSCHED_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly STUB_DIR="${WSCHED_STUB_DIR:-/usr/local/lib}"
readonly SID_SOURCE=/etc/apt/sources.list.d/wsched-sid.sources
readonly SID_PIN=/etc/apt/preferences.d/wsched-sid
readonly STUB_MARKER=wsched_ggml_cpu_stub

did_something=0
apt_updated=0

say() { printf 'deps: %s\n' "$*"; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

as_root() {
	if [[ ${EUID} -eq 0 ]]; then
		"$@"
	else
		command -v sudo >/dev/null || die "need root (or sudo) to run: $*"
		sudo "$@"
	fi
}

# installed PKG — true when dpkg knows PKG as fully installed.
installed() {
	[[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == "ii "* ]]
}

apt_update() {
	if [[ ${apt_updated} -eq 0 ]]; then
		say "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		apt_updated=1
	fi
}

# apt_install [APT-OPTIONS...] PKG... — install quietly, non-interactively. --no-remove makes apt
# abort instead of removing anything, which matters for the partial upgrade from sid.
apt_install() {
	apt_update
	say "apt-get install $*"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends --no-remove "$@" >/dev/null
	did_something=1
}

debian_version() {
	# Prints the major VERSION_ID (12, 13, ...) or "sid" for unstable/testing
	# (which carry no VERSION_ID), or "other" for non-Debian systems.
	local id="" version_id=""
	# shellcheck disable=SC1091
	. /etc/os-release
	id="${ID:-}"
	version_id="${VERSION_ID:-}"
	if [[ "${id}" != debian ]]; then
		echo other
	elif [[ -z "${version_id}" ]]; then
		echo sid
	else
		echo "${version_id%%.*}"
	fi
}

# Tools cgo and the packaging need. gcc -print-file-name answers the bare name
# when a library's link-time .so is missing.
install_build_tools() {
	local pkgs=()
	command -v gcc >/dev/null || pkgs+=(gcc libc6-dev)
	command -v g++ >/dev/null || pkgs+=(g++)
	if command -v gcc >/dev/null && [[ "$(gcc -print-file-name=libstdc++.so)" == libstdc++.so ]]; then
		pkgs+=(g++)
	fi
	command -v pkg-config >/dev/null || pkgs+=(pkg-config)
	command -v systemd-analyze >/dev/null || pkgs+=(systemd)
	command -v ffmpeg >/dev/null || pkgs+=(ffmpeg)
	command -v curl >/dev/null || pkgs+=(curl)
	if [[ ${#pkgs[@]} -gt 0 ]]; then
		apt_install "${pkgs[@]}"
	fi
}

write_file_if_changed() { # PATH CONTENT
	local path="$1" content="$2"
	if [[ -f "${path}" ]] && [[ "$(cat "${path}")" == "${content}" ]]; then
		return 0
	fi
	say "writing ${path}"
	printf '%s\n' "${content}" | as_root tee "${path}" >/dev/null
	apt_updated=0 # sources changed: the next install must refresh the lists
}

add_sid_source() {
	write_file_if_changed "${SID_SOURCE}" "# Added by wsched packaging/deps/install-deps.sh: libwhisper-dev from sid.
Types: deb
URIs: ${MIRROR}
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
Check-Valid-Until: no"
	write_file_if_changed "${SID_PIN}" "# Added by wsched packaging/deps/install-deps.sh: never take sid packages
# unless asked for with -t sid (priority 100 < 500 of the installed release).
Package: *
Pin: release n=sid
Pin-Priority: 100"
}

# has_candidate PKG — true when the configured apt sources offer PKG.
has_candidate() {
	local candidate
	candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')"
	[[ -n "${candidate}" && "${candidate}" != "(none)" ]]
}

install_whisper() {
	if installed libwhisper-dev && installed libggml-dev; then
		return 0
	fi
	# A source file left by an earlier run means "taking these packages from sid" — also after that run
	# upgraded base-files (libc6 from sid Breaks base-files << 13.3), when /etc/os-release reads
	# "forky/sid". Without -t sid the sid packages' dependencies (libc6 >= 2.43) would not resolve.
	if [[ -f "${SID_SOURCE}" ]]; then
		apt_install -t sid libwhisper-dev libggml-dev
		return 0
	fi
	apt_update
	if has_candidate libwhisper-dev && has_candidate libggml-dev; then
		apt_install libwhisper-dev libggml-dev # sid/testing, or any release that has them
		return 0
	fi
	local version
	version="$(debian_version)"
	case "${version}" in
	1[2-9] | [2-9][0-9] | sid)
		# Debian 12 has no whisper.cpp, Debian 13 neither (trixie-backports has ggml only).
		add_sid_source
		apt_install -t sid libwhisper-dev libggml-dev
		;;
	*)
		die "no libwhisper-dev in the apt sources and not Debian >= 12 (${version}): install libwhisper-dev >= 1.9.5 and libggml-dev by hand"
		;;
	esac
}

# links_ggml_cpu — true when the linker resolves -lggml-cpu (our stub from an
# earlier run, or a real library). ld searches /usr/local/lib by default even
# though `gcc -print-file-name` does not, so ask the linker itself.
links_ggml_cpu() {
	printf 'int main(void) { return 0; }\n' |
		gcc -x c - -o /dev/null -lggml-cpu >/dev/null 2>&1
}

# The stub is only needed while no libggml-cpu.so is on the linker path.
install_stub() {
	if links_ggml_cpu; then
		return 0
	fi
	local tmp
	tmp="$(mktemp -d)"
	printf '/* Empty stand-in for libggml-cpu.so: Debian loads the ggml CPU backend\n * as a module; the whisper.cpp Go bindings still link -lggml-cpu. */\nint %s;\n' \
		"${STUB_MARKER}" >"${tmp}/stub.c"
	gcc -shared -fPIC -Wl,-soname,libggml-cpu.so -o "${tmp}/libggml-cpu.so" "${tmp}/stub.c"
	say "installing stub ${STUB_DIR}/libggml-cpu.so"
	as_root install -D -m 0644 "${tmp}/libggml-cpu.so" "${STUB_DIR}/libggml-cpu.so"
	rm -rf "${tmp}"
	as_root ldconfig
	did_something=1
}

check_result() {
	local missing=()
	local pkg
	for pkg in libwhisper-dev libggml-dev; do
		installed "${pkg}" || missing+=("${pkg}")
	done
	links_ggml_cpu || missing+=("libggml-cpu.so (the linker does not resolve -lggml-cpu)")
	[[ -f /usr/include/whisper.h ]] || missing+=(/usr/include/whisper.h)
	[[ ${#missing[@]} -eq 0 ]] || die "still missing after install: ${missing[*]}"
}

main() {
	command -v dpkg-query >/dev/null || die "not a Debian system (no dpkg-query)"
	install_build_tools
	install_whisper
	install_stub
	check_result
	local v
	v="$(dpkg-query -W -f='${Version}' libwhisper-dev)"
	if [[ ${did_something} -eq 1 ]]; then
		say "done: libwhisper-dev ${v}, libggml-dev $(dpkg-query -W -f='${Version}' libggml-dev), stub ${STUB_DIR}/libggml-cpu.so"
	else
		say "ok: libwhisper-dev ${v} already installed"
	fi
}

main "$@"
