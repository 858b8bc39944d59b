#!/usr/bin/env bash
# install-deps.sh — what the whisper.cpp backend needs to build and run, without changing the host's
# Debian suite: no foreign apt source or pin is added, no package from another suite is installed, libc
# is untouched. whisper.cpp and ggml go into a project-owned prefix (default .cache/whisper), by one of
# three routes, tried in this order when WSCHED_WHISPER_ROUTE=auto (the default):
#
#   system   the host's own apt sources offer libwhisper-dev and libggml-dev (Debian sid/forky, Ubuntu
#            releases that ship them): apt-get install them (plus libggml0-backend-cuda where nvcc is
#            installed and the sources have it).
#   source   Debian's own source packages of ggml and whisper.cpp (`apt-get source` through a private
#            apt configuration that lists only the deb-src entry of WSCHED_WHISPER_SUITE, default sid),
#            built with the host's cmake and compiler into the prefix, rpath set; with -DGGML_CUDA=ON
#            where nvcc exists (CMAKE_CUDA_ARCHITECTURES from nvidia-smi when it sees a GPU).
#   bundle   the suite's binary packages (libwhisper1, libggml0 and their runtime: libc6, libstdc++6,
#            libgcc-s1, libgomp1), downloaded through the same private apt configuration and unpacked
#            with dpkg-deb -x into the prefix — never installed. The backend is linked with the
#            bundle's dynamic loader and rpath, so only the backend process runs on the bundled libc.
#            CPU only. Used where the source packages cannot be fetched.
#
# The private apt state lives in <prefix>.apt (lists, downloads); nothing under /etc/apt is written.
# The prefix is built in <prefix>.new and renamed into place only after a link-and-run check, so a
# failure leaves the previous prefix (or none) and nothing half-made. The result is described by
# <prefix>/whisper.env (the cgo flags, sourced by mk/deps.mk) and <prefix>/MANIFEST (route, versions,
# what was installed). Idempotent: a second run prints one line.
#
# Also installs, from the host's own sources only, the build tools cgo and the tests need when missing:
# gcc, g++, pkg-config, systemd (systemd-analyze), ffmpeg, curl, shellcheck; cmake and dpkg-dev for the
# source route.
#
# Environment:
#   WSCHED_WHISPER_PREFIX  the prefix (default: .cache/whisper under the current directory)
#   WSCHED_WHISPER_ROUTE   auto | system | source | bundle (default auto)
#   WSCHED_WHISPER_SUITE   the Debian suite for the source and bundle routes (default sid)
#   WSCHED_DEBIAN_MIRROR   its mirror (default http://deb.debian.org/debian)
#   WSCHED_WHISPER_SRC     source route with local trees instead of apt-get source: "GGML_DIR:WHISPER_DIR"
#   WSCHED_CUDA_ARCH       CMAKE_CUDA_ARCHITECTURES for the source route (default: from nvidia-smi)
set -euo pipefail

deps_tag=deps
# shellcheck source=packaging/deps/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PREFIX="${WSCHED_WHISPER_PREFIX:-${PWD}/.cache/whisper}"
ROUTE="${WSCHED_WHISPER_ROUTE:-auto}"
SUITE="${WSCHED_WHISPER_SUITE:-sid}"
MIRROR="${WSCHED_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
readonly PREFIX ROUTE SUITE MIRROR
readonly OLD_SID_SOURCE=/etc/apt/sources.list.d/wsched-sid.sources OLD_SID_PIN=/etc/apt/preferences.d/wsched-sid
# The bundle: what libwhisper1 and libggml0 need at run time (closure checked after unpacking).
readonly BUNDLE_PKGS=(libwhisper1 libwhisper-dev libggml0 libggml-dev libc6 libgcc-s1 libgomp1 libstdc++6 gcc-16-base)
MULTIARCH="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
readonly MULTIARCH

stage="${PREFIX}.new"
cleanup() {
	local rc=$?
	[[ ${rc} -eq 0 ]] || rm -rf "${stage}" "${stage}.build" # a build log stays for the reader
	apt_cleanup
	exit "${rc}"
}
trap cleanup EXIT

# ---- the host's own packages ----------------------------------------------------------------------

# Earlier versions of this script added a sid source and pin; the packages they brought stay (removing
# them could break the system), but the source goes so that no later apt run takes anything from sid.
remove_old_sid_source() {
	local f
	for f in "${OLD_SID_SOURCE}" "${OLD_SID_PIN}"; do
		if [[ -f "${f}" ]] && grep -q 'wsched' "${f}"; then
			say "removing ${f}, left by an earlier wsched install-deps.sh"
			as_root rm -f "${f}"
			apt_updated=0
		fi
	done
}

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
	command -v shellcheck >/dev/null || pkgs+=(shellcheck)
	[[ ${#pkgs[@]} -eq 0 ]] || apt_install "${pkgs[@]}"
}

# ---- the private apt configuration (source and bundle routes) -------------------------------------

papt_dir="${PREFIX}.apt"
papt_opts=()

papt_setup() {
	[[ ${#papt_opts[@]} -eq 0 ]] || return 0
	mkdir -p "${papt_dir}"/{etc/sources.list.d,etc/preferences.d,lists/partial,cache/archives/partial,work}
	: >"${papt_dir}/etc/sources.list"
	: >"${papt_dir}/status"
	cat >"${papt_dir}/etc/sources.list.d/${SUITE}.sources" <<EOF
# Private to wsched's install-deps.sh: read only through -o Dir::Etc::* options, never by the host's apt.
Types: deb deb-src
URIs: ${MIRROR}
Suites: ${SUITE}
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
	if getent passwd _apt >/dev/null; then
		as_root chown _apt:root "${papt_dir}/lists/partial" "${papt_dir}/cache/archives/partial" "${papt_dir}/work"
	fi
	papt_opts=(
		-o "Dir::Etc::sourcelist=${papt_dir}/etc/sources.list"
		-o "Dir::Etc::sourceparts=${papt_dir}/etc/sources.list.d"
		-o "Dir::Etc::preferences=${papt_dir}/etc/preferences"
		-o "Dir::Etc::preferencesparts=${papt_dir}/etc/preferences.d"
		-o "Dir::State::Lists=${papt_dir}/lists"
		-o "Dir::State::status=${papt_dir}/status"
		-o "Dir::Cache=${papt_dir}/cache"
	)
	say "apt-get update (private configuration: ${SUITE} from ${MIRROR}, in ${papt_dir})"
	apt_run "${papt_opts[@]}" update
}

# papt_version PKG — the candidate version of PKG (binary) in the private configuration.
papt_version() {
	apt-cache "${papt_opts[@]}" policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'
}

# ---- routes ---------------------------------------------------------------------------------------

# has_nvcc — true when a CUDA compiler is installed (the GPU build is possible).
has_nvcc() { command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; }

route_system() {
	local pkgs=(libwhisper-dev libggml-dev)
	if has_nvcc && has_candidate libggml0-backend-cuda; then pkgs+=(libggml0-backend-cuda); fi
	apt_install "${pkgs[@]}"
	mkdir -p "${stage}/lib"
	make_stub "${stage}/lib"
	write_env system "$(pkg-config --cflags whisper 2>/dev/null)" "-L${PREFIX}/lib -Wl,--as-needed"
	write_manifest system "libwhisper-dev=$(dpkg-query -W -f='${Version}' libwhisper-dev)" \
		"libggml-dev=$(dpkg-query -W -f='${Version}' libggml-dev)"
}

# The Go bindings link -lggml-cpu, which Debian's ggml does not ship (its CPU backend is a set of
# modules loaded by ggml_backend_load_all()). An empty stub satisfies the linker; --as-needed keeps it
# out of the binaries' NEEDED list, so it is a build-time file only.
make_stub() {
	printf '/* Empty stand-in for libggml-cpu.so: see packaging/deps/install-deps.sh. */\nint wsched_ggml_cpu_stub;\n' >"$1/stub.c"
	gcc -shared -fPIC -Wl,-soname,libggml-cpu.so -o "$1/libggml-cpu.so" "$1/stub.c"
	rm -f "$1/stub.c"
}

source_trees() { # prints "GGML_DIR WHISPER_DIR"
	if [[ -n "${WSCHED_WHISPER_SRC:-}" ]]; then
		printf '%s %s\n' "${WSCHED_WHISPER_SRC%%:*}" "${WSCHED_WHISPER_SRC#*:}"
		return 0
	fi
	local work="${papt_dir}/work"
	rm -rf "${work:?}"/*
	# To stderr: stdout is the answer. apt's own output (on a missing source package a raw
	# "E: Failed to fetch …dsc 404 Not Found") goes to a log; the caller says what it does instead.
	say "apt-get source ggml whisper.cpp (${SUITE})" >&2
	(cd "${work}" && as_root env DEBIAN_FRONTEND=noninteractive TMPDIR="${apt_tmpdir}" \
		apt-get "${papt_opts[@]}" source ggml whisper.cpp) >"${papt_dir}/source.log" 2>&1 || return 1
	printf '%s %s\n' "$(find "${work}" -maxdepth 1 -type d -name 'ggml-*' | head -1)" \
		"$(find "${work}" -maxdepth 1 -type d -name 'whisper.cpp-*' | head -1)"
}

cuda_cmake_flags() {
	has_nvcc || return 0
	local arch="${WSCHED_CUDA_ARCH:-}"
	if [[ -z "${arch}" ]] && command -v nvidia-smi >/dev/null; then
		arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u | tr -d . | paste -sd';')"
	fi
	printf -- '-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=%s\n' "${arch:-native}"
}

# cmake_build NAME SRC FLAGS... — configure, build and install one tree into the stage.
cmake_build() {
	local name="$1" src="$2" log="${stage}.build.log"
	shift 2
	if ! { cmake -S "${src}" -B "${stage}.build/${name}" "$@" &&
		cmake --build "${stage}.build/${name}" -j "$(nproc)" &&
		cmake --install "${stage}.build/${name}"; } >>"${log}" 2>&1; then
		tail -n 30 "${log}" >&2
		die "building ${name} failed (log: ${log})"
	fi
}

# source_unavailable — why the source route could not be taken, in one phrase, from apt's log.
source_unavailable() {
	local log="${papt_dir}/source.log" why=""
	# e.g. "E: Failed to fetch …/ggml_0.27.0-1.dsc  404  Not Found [IP: …]" → "ggml_0.27.0-1.dsc 404 Not Found"
	[[ -f "${log}" ]] && why="$(grep -m1 -oE '[^/ ]+ +[0-9]{3} +[A-Z][A-Za-z ]*[a-z]' "${log}" | tr -s ' ')"
	printf 'source package unavailable from %s (%s: %s; apt output in %s)' "${MIRROR}" "${SUITE}" \
		"${why:-apt-get source failed}" "${log}"
}

route_source() {
	local trees ggml_src whisper_src cuda
	rm -f "${papt_dir}/source.log"
	if [[ -z "${WSCHED_WHISPER_SRC:-}" ]]; then
		apt_install dpkg-dev
		papt_setup
	fi
	# A subshell, so that a failed download (die) only fails this route and auto can go on.
	trees="$( (source_trees) )" || return 1
	read -r ggml_src whisper_src <<<"${trees}"
	[[ -d "${ggml_src}" && -d "${whisper_src}" ]] || return 1
	apt_install cmake
	cuda="$(cuda_cmake_flags)"
	local common=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON "-DCMAKE_INSTALL_PREFIX=${stage}"
		"-DCMAKE_INSTALL_RPATH=${PREFIX}/lib" -DCMAKE_INSTALL_LIBDIR=lib)
	say "building ggml from ${ggml_src} (${cuda:-CPU only}; $(nproc) jobs)"
	# shellcheck disable=SC2086 # cuda holds zero or two flags
	# shellcheck disable=SC2086 # cuda holds zero or two flags
	cmake_build ggml "${ggml_src}" "${common[@]}" -DGGML_BACKEND_DL=OFF -DGGML_NATIVE=ON \
		-DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF ${cuda}
	say "building whisper.cpp from ${whisper_src}"
	cmake_build whisper "${whisper_src}" "${common[@]}" -DWHISPER_USE_SYSTEM_GGML=ON \
		"-DCMAKE_PREFIX_PATH=${stage}" -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=OFF \
		-DWHISPER_BUILD_SERVER=OFF
	rm -rf "${stage}.build" "${stage}.build.log"
	write_env source "-I${PREFIX}/include" \
		"-L${PREFIX}/lib -Wl,-rpath,${PREFIX}/lib"
	write_manifest source "ggml=$(basename "${ggml_src}")" "whisper.cpp=$(basename "${whisper_src}")" \
		"cuda=${cuda:-off}"
}

route_bundle() {
	papt_setup
	local work="${papt_dir}/work" pkg versions=()
	rm -rf "${work:?}"/*
	say "apt-get download ${BUNDLE_PKGS[*]} (${SUITE}; unpacked into ${PREFIX}, not installed)"
	(cd "${work}" && apt_run "${papt_opts[@]}" download "${BUNDLE_PKGS[@]}")
	mkdir -p "${stage}/root" "${stage}/lib"
	for pkg in "${work}"/*.deb; do
		dpkg-deb -x "${pkg}" "${stage}/root"
		versions+=("$(dpkg-deb -f "${pkg}" Package)=$(dpkg-deb -f "${pkg}" Version)")
	done
	rm -f "${work}"/*.deb
	make_stub "${stage}/lib"
	check_bundle_closure
	local L="${PREFIX}/root/usr/lib/${MULTIARCH}"
	# --disable-new-dtags writes DT_RPATH, which (unlike RUNPATH) also serves the libraries' own
	# dependencies; --allow-shlib-undefined because the bundled libraries need symbol versions of the
	# bundled libc that the host's libc, which the linker sees, lacks.
	write_env bundle "-I${PREFIX}/root/usr/include -DWSCHED_GGML_BACKEND_DIR=\"${L}/ggml/backends0\"" \
		"-L${PREFIX}/lib -L${L} -Wl,--as-needed -Wl,--disable-new-dtags -Wl,-rpath,${L} -Wl,--dynamic-linker=${L}/ld-linux-x86-64.so.2 -Wl,--allow-shlib-undefined"
	write_manifest bundle "${versions[@]}"
}

# check_bundle_closure — every library of the bundle resolves its dependencies inside the bundle.
check_bundle_closure() {
	local L="${stage}/root/usr/lib/${MULTIARCH}" lib out
	for lib in "${L}"/libwhisper.so.1 "${L}"/libggml.so.0 "${L}"/ggml/backends0/*.so; do
		out="$("${L}/ld-linux-x86-64.so.2" --library-path "${L}" --list "${lib}")" ||
			die "bundle: ${lib} does not load with the bundled loader"
		if grep -E '=> ' <<<"${out}" | grep -v -- "=> ${L}/" | grep -q .; then
			die "bundle: ${lib} needs libraries outside the bundle:"$'\n'"${out}"
		fi
	done
}

# ---- result ---------------------------------------------------------------------------------------

# write_env ROUTE CFLAGS LDFLAGS — the prefix's cgo flags as a shell file. The values are single-quoted:
# cgo splits them at spaces and keeps quotes inside a flag (-DX="path"). No path may hold a space or '.
write_env() {
	[[ "${PREFIX}" != *[[:space:]\']* ]] || die "the prefix path may not contain spaces or quotes: ${PREFIX}"
	cat >"${stage}/whisper.env" <<EOF
# Written by packaging/deps/install-deps.sh (route: $1). Sourced by mk/deps.mk before building
# anything that imports the whisper.cpp Go bindings.
export CGO_ENABLED=1
export CGO_CFLAGS='-O2 -g $2'
export CGO_LDFLAGS='$3'
EOF
}

write_manifest() { # ROUTE ITEM...
	local route="$1"
	shift
	{
		echo "route=${route}"
		echo "suite=${SUITE}"
		printf '%s\n' "$@"
	} >"${stage}/MANIFEST"
}

# check_stage — a C program linked and run with the prefix's flags prints whisper.cpp's system info:
# the headers, libraries, loader and rpath all work before the prefix replaces the old one.
check_stage() {
	local probe="${stage}/.check"
	mkdir -p "${probe}"
	printf '#include <stdio.h>\n#include <whisper.h>\nint main(void) { puts(whisper_print_system_info()); return 0; }\n' >"${probe}/c.c"
	# The flags name the final prefix; point them at the stage for this one build.
	(
		# shellcheck disable=SC1091
		. "${stage}/whisper.env"
		local flags
		read -ra flags <<<"${CGO_CFLAGS//${PREFIX}/${stage}} ${CGO_LDFLAGS//${PREFIX}/${stage}}"
		gcc -o "${probe}/c" "${probe}/c.c" "${flags[@]}" -lwhisper -lggml -lggml-base
	) || die "check: a program does not link against the new prefix"
	# The libraries' own RUNPATH names the final prefix, not yet in place: the stage's lib/ stands in.
	LD_LIBRARY_PATH="${stage}/lib" "${probe}/c" >/dev/null ||
		die "check: a program linked against the new prefix does not run"
	rm -rf "${probe}"
}

install_whisper() {
	if [[ -f "${PREFIX}/whisper.env" && -f "${PREFIX}/MANIFEST" ]]; then
		local have
		have="$(awk -F= '$1 == "route" { print $2 }' "${PREFIX}/MANIFEST")"
		if [[ "${ROUTE}" == auto || "${ROUTE}" == "${have}" ]]; then
			say "ok: whisper.cpp in ${PREFIX} (route ${have}); remove it to rebuild"
			return 0
		fi
	fi
	rm -rf "${stage}"
	mkdir -p "${stage}"
	case "${ROUTE}" in
	system) route_system ;;
	source) route_source || die "source route: $(source_unavailable)" ;;
	bundle) route_bundle ;;
	auto)
		apt_update
		if has_candidate libwhisper-dev && has_candidate libggml-dev; then
			route_system
		elif route_source; then
			:
		else
			say "$(source_unavailable), using the bundle route (Debian's binary packages, unpacked into ${PREFIX})"
			rm -rf "${stage}" && mkdir -p "${stage}"
			route_bundle
		fi
		;;
	*) die "WSCHED_WHISPER_ROUTE=${ROUTE}: want auto, system, source or bundle" ;;
	esac
	check_stage
	rm -rf "${PREFIX}"
	mv "${stage}" "${PREFIX}"
	say "done: whisper.cpp in ${PREFIX}: $(grep -v '^suite=' "${PREFIX}/MANIFEST" | tr '\n' ' ')"
}

main() {
	command -v dpkg-query >/dev/null || die "not a Debian system (no dpkg-query)"
	apt_tmp_init
	remove_old_sid_source
	install_build_tools
	install_whisper
	report_installed
}

main "$@"
