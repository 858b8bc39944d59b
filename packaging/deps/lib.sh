# shellcheck shell=bash
# lib.sh — apt helpers shared by install-deps.sh and packaging-deps.sh (sourced, not run).
#
# Every apt step checks its exit status and logs what it did. apt drops privileges to `_apt` for
# downloads and signature checks and writes temporary files under $TMPDIR: on a machine whose /tmp is
# not world-writable that fails with GPG warnings. apt_tmp gives apt a temporary directory that `_apt`
# owns, removed on exit.
#
# Callers set `deps_tag` (the log prefix) before sourcing.

: "${deps_tag:=deps}"
apt_updated=0
apt_tmpdir=""
dpkg_before="" # dpkg's package list before the first install of this run

say() { printf '%s: %s\n' "${deps_tag}" "$*"; }
die() {
	printf '%s: error: %s\n' "${deps_tag}" "$*" >&2
	exit 1
}

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

# apt_tmp_init — makes apt_tmpdir, a temporary directory owned by _apt (mode 0700), once per run;
# apt_cleanup removes it. It lives under /var/cache/apt, which apt owns, so /tmp's mode does not
# matter. Call it from the main shell (not a subshell) so that the one directory is shared and removed.
apt_tmp_init() {
	if [[ -z "${apt_tmpdir}" ]]; then
		apt_tmpdir="$(as_root mktemp -d /var/cache/apt/wsched-tmp.XXXXXX)" ||
			die "cannot make a temporary directory for apt under /var/cache/apt"
		if getent passwd _apt >/dev/null; then
			as_root chown _apt:root "${apt_tmpdir}"
		fi
		as_root chmod 0700 "${apt_tmpdir}"
	fi
}

apt_cleanup() {
	if [[ -n "${apt_tmpdir}" ]]; then
		as_root rm -rf "${apt_tmpdir}"
		apt_tmpdir=""
	fi
}

# apt_try ARGS... — apt-get as apt_run does, but a failure returns its exit status after one line
# (apt's first error) instead of ending the script.
apt_try() {
	local log rc=0
	apt_tmp_init
	log="$(mktemp)"
	as_root env DEBIAN_FRONTEND=noninteractive TMPDIR="${apt_tmpdir}" apt-get "$@" >"${log}" 2>&1 || rc=$?
	[[ ${rc} -eq 0 ]] || say "apt-get $1 ... failed: $(grep -m1 '^E: ' "${log}" || tail -n 1 "${log}")" >&2
	rm -f "${log}"
	return "${rc}"
}

# apt_run ARGS... — apt-get, non-interactive, with apt's own temporary directory; its output goes to a
# log that is shown only when it fails.
apt_run() {
	local log rc=0
	apt_tmp_init
	log="$(mktemp)"
	as_root env DEBIAN_FRONTEND=noninteractive TMPDIR="${apt_tmpdir}" apt-get "$@" >"${log}" 2>&1 || rc=$?
	# apt-get update exits 0 even when a list could not be verified: treat its warnings as failures.
	if [[ ${rc} -eq 0 && "$1" == update ]] && grep -qE '^(W|E): .*(GPG|NO_PUBKEY|not signed|Failed to fetch)' "${log}"; then
		rc=100
	fi
	if [[ ${rc} -ne 0 ]]; then
		tail -n 25 "${log}" >&2
		rm -f "${log}"
		die "apt-get $* failed (exit ${rc})"
	fi
	rm -f "${log}"
}

apt_update() {
	if [[ ${apt_updated} -eq 0 ]]; then
		say "apt-get update"
		apt_run update
		apt_updated=1
	fi
}

dpkg_list() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}=${Version}\n' 2>/dev/null | awk '$1 == "ii" { print $2 }' | sort; }

# apt_install PKG... — installs from the host's own configured sources only: never a -t, never a
# foreign suite. --no-remove makes apt abort instead of removing anything.
apt_install() {
	local pkg missing=()
	for pkg in "$@"; do installed "${pkg}" || missing+=("${pkg}"); done
	[[ ${#missing[@]} -gt 0 ]] || return 0
	[[ -n "${dpkg_before}" ]] || dpkg_before="$(dpkg_list)"
	apt_update
	say "apt-get install ${missing[*]}"
	apt_run install -y --no-install-recommends --no-remove "${missing[@]}"
	for pkg in "${missing[@]}"; do
		installed "${pkg}" || die "apt-get install reported success but ${pkg} is not installed"
	done
}

# has_candidate PKG — true when the host's configured apt sources offer PKG.
has_candidate() {
	local candidate
	candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }')"
	[[ -n "${candidate}" && "${candidate}" != "(none)" ]]
}

# report_installed — the log lines that say what this run installed or upgraded through dpkg (with
# the dependencies apt pulled in), compared with dpkg's list before the first install.
report_installed() {
	[[ -n "${dpkg_before}" ]] || return 0
	local added
	added="$(comm -13 <(printf '%s\n' "${dpkg_before}") <(dpkg_list) | tr '\n' ' ')"
	[[ -n "${added}" ]] && say "installed from the host's own apt sources: ${added}"
	return 0
}
