#!/usr/bin/env bash
# systemd-test.sh — the wsched packages under a real systemd as PID 1 (`make systemd-test`, part of
# `make test`). Boots a throwaway Debian 12 with systemd-nspawn, installs the freshly built .debs with
# the README's own install lines, and checks as a user in group wsched what a new user meets: socket
# activation, `wsched status` without WSCHED_SOCKET, a transcription of jfk.wav through each packaged
# backend (whisper.cpp with the weightless test models, exec with a stdlib Python app, sherpa-onnx with
# a generated SenseVoice model), the sandbox and its exposure figure, the watchdog, a lease across
# `systemctl restart`, `systemctl stop` with warm backends, and purge.
#
# Needs root, systemd-container (systemd-nspawn), debootstrap (first run only) and util-linux (nsenter);
# `make deps` installs them (packaging/deps/packaging-deps.sh). Idempotent and leaves the host as it
# was: every run unpacks a fresh root from a cached tarball and deletes it afterwards; the tarball is
# built once with debootstrap (~1.5–3 min) and kept outside the clone, keyed by suite and package list.
#
# Environment:
#   DIST             the packages (default SRC/dist, from `make deb`)
#   PACKAGING_CACHE  where the root tarball is kept (default /var/cache/wsched-packaging)
#   PACKAGING_SUITE  Debian suite of the root (default bookworm)
#   PACKAGING_MIRROR Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   MAX_EXPOSURE     highest `systemd-analyze security` exposure accepted (default 2.5)
#   KEEP=1           leave the container running at the end (prints how to enter it)
#
# Findings this relies on (measured on a Debian 12 VM without systemd as PID 1, cgroup v1):
#   - nspawn can neither register with machined nor get a scope over the bus: --register=no --keep-unit;
#   - the container's systemd enforces DevicePolicy=/IPAddressDeny= (cgroup BPF) only on the unified
#     hierarchy: SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1, and --system-call-filter=bpf to load the programs;
#   - with --keep-unit nspawn nests itself in the cgroup it runs in, so it is started in one of its own
#     (removed at the end), not in the root cgroup a second run would share.

# Single-quoted command lines are run by a shell inside the container, where they expand.
# shellcheck disable=SC2016
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIST=${DIST:-$SRC/dist}
CACHE=${PACKAGING_CACHE:-/var/cache/wsched-packaging}
SUITE=${PACKAGING_SUITE:-bookworm}
MIRROR=${PACKAGING_MIRROR:-http://deb.debian.org/debian}
MAX_EXPOSURE=${MAX_EXPOSURE:-2.5}
KEEP=${KEEP:-0}
# The root: minbase plus systemd, dbus (systemctl and systemd-analyze over the bus), logind (login
# sessions: su -l), procps, and python3 for the exec backend's test app. The tarball's name carries a
# hash of this list, so changing it builds a new root.
ROOT_PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,procps,python3
TARBALL=$CACHE/$SUITE-nspawn-$(printf '%s' "$ROOT_PACKAGES" | sha256sum | cut -c1-12).tar

WORK=$(mktemp -d "${TMPDIR:-/tmp}/wsched-systemd-test.XXXXXX")
LOGS=$WORK/logs
ROOT=$WORK/root
MACHINE=wsched-test-$$
mkdir -p "$LOGS"
T_START=$(date +%s.%N)

pass=0 failed=0
say() { printf '%s systemd-test: %s\n' "$(date +%T)" "$*"; }
ok() { pass=$((pass + 1)); say "ok    $*"; }
bad() { failed=$((failed + 1)); say "FAIL  $*"; }
# check NAME CMD... : ok when CMD succeeds (its output goes to checks.log). Every command run in the
# container is bounded: inside() and the nsenter calls of sh -c checks carry a timeout.
check() {
	local n=$1
	shift
	echo "=== $n" >>"$LOGS/checks.log"
	if "$@" >>"$LOGS/checks.log" 2>&1; then ok "$n"; else bad "$n"; fi
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# --- prerequisites ------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || { echo "systemd-test: run as root" >&2; exit 2; }
for tool in systemd-nspawn debootstrap nsenter; do
	command -v "$tool" >/dev/null || { echo "systemd-test: $tool missing: run make deps" >&2; exit 2; }
done
shopt -s nullglob
debs=("$DIST"/wsched_*.deb "$DIST"/wsched-backend-whisper_*.deb "$DIST"/wsched-backend-sherpa_*.deb "$DIST"/wsched-backend-exec_*.deb)
shopt -u nullglob
[ ${#debs[@]} = 4 ] || { echo "systemd-test: want the four packages in $DIST (make deb), found: ${debs[*]}" >&2; exit 2; }
# ../shared beside the repository (found upwards, as internal/testshared does): jfk.wav, weightless models
SHARED=''
d=$SRC
while [ "$d" != / ]; do
	if [ -f "$d/shared/audio/jfk.wav" ]; then SHARED=$d/shared; break; fi
	d=$(dirname "$d")
done
[ -n "$SHARED" ] || { echo "systemd-test: shared/audio/jfk.wav not found above $SRC" >&2; exit 2; }

# --- cached container root ---------------------------------------------------------------------------
if [ ! -f "$TARBALL" ]; then
	mkdir -p "$CACHE"
	t=$(date +%s.%N)
	say "debootstrap $SUITE (once; cached in $TARBALL)"
	tmp=$(mktemp -d "$CACHE/debootstrap.XXXXXX")
	if ! timeout 900 debootstrap --variant=minbase --include="$ROOT_PACKAGES" "$SUITE" "$tmp/root" "$MIRROR" \
		>"$LOGS/debootstrap.log" 2>&1; then
		tail -n 30 "$LOGS/debootstrap.log"
		rm -rf "$tmp"
		exit 1
	fi
	chroot "$tmp/root" apt-get clean
	echo wsched-test >"$tmp/root/etc/hostname"
	tar -C "$tmp/root" -cf "$TARBALL.partial" . && mv "$TARBALL.partial" "$TARBALL"
	rm -rf "$tmp"
	say "debootstrap: $(elapsed "$t") s"
fi
t=$(date +%s.%N)
mkdir -p "$ROOT"
tar -C "$ROOT" -xf "$TARBALL"
say "unpacked the root: $(elapsed "$t") s"

# --- boot / halt ---------------------------------------------------------------------------------------
NSPAWN_ARGS=(-D "$ROOT" -b -M "$MACHINE" --register=no --private-network --system-call-filter=bpf --console=passive)
NSPAWN_ENV=()
[ -d /run/systemd/system ] || NSPAWN_ARGS+=(--keep-unit)
if [ -d /sys/fs/cgroup/unified ] || [ -d /sys/fs/cgroup/systemd ]; then
	NSPAWN_ENV+=(SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1)
fi
CGROUPS=()
if [ ! -d /run/systemd/system ]; then
	for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
		if [ -f "$h/cgroup.procs" ] && { [ "$h" != /sys/fs/cgroup ] || [ "$(stat -fc %T "$h")" = cgroup2fs ]; }; then
			mkdir -p "$h/$MACHINE" && CGROUPS+=("$h/$MACHINE")
		fi
	done
fi
NSPAWN_PID='' LEADER=''
inside() { timeout 120 nsenter -t "$LEADER" -a -- "$@"; }
boot() {
	local t st=''
	t=$(date +%s.%N)
	setsid env "${NSPAWN_ENV[@]}" TEST_CGROUPS="${CGROUPS[*]}" \
		sh -c 'for c in $TEST_CGROUPS; do echo $$ >"$c/cgroup.procs" || exit 1; done; exec systemd-nspawn "$@"' sh "${NSPAWN_ARGS[@]}" \
		>>"$LOGS/nspawn.log" 2>&1 &
	NSPAWN_PID=$!
	for _ in $(seq 1 300); do
		LEADER=$(pgrep -P "$NSPAWN_PID" | head -n1 || true)
		if [ -n "$LEADER" ]; then
			st=$(timeout 10 nsenter -t "$LEADER" -a -- systemctl is-system-running 2>/dev/null || true)
			case $st in running | degraded) break ;; esac
		fi
		kill -0 "$NSPAWN_PID" 2>/dev/null || { cat "$LOGS/nspawn.log"; echo "systemd-test: nspawn exited" >&2; exit 1; }
		sleep 0.2
	done
	case $st in
	running) say "booted in $(elapsed "$t") s (container PID 1 = host PID $LEADER)" ;;
	*) bad "boot: system state '$st' after $(elapsed "$t") s"; inside systemctl --failed --no-pager || true ;;
	esac
}
# halt_container: a clean poweroff when it comes quickly; otherwise (a loaded machine can keep
# systemd-shutdown waiting for minutes) SIGKILL to the container's PID 1, which ends every process of
# its PID namespace — killing only nspawn would leave that init behind, orphaned, in the cgroups.
halt_container() {
	{ [ -n "$NSPAWN_PID" ] && kill -0 "$NSPAWN_PID" 2>/dev/null; } || return 0
	timeout 10 nsenter -t "$LEADER" -a -- systemctl poweroff --no-block >/dev/null 2>&1 || true
	for _ in $(seq 1 50); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.2; done
	# (only while it is still nspawn's child: never a recycled PID)
	if [ "$(ps -o ppid= -p "$LEADER" 2>/dev/null | tr -d ' ')" = "$NSPAWN_PID" ]; then kill -KILL "$LEADER" 2>/dev/null || true; fi
	for _ in $(seq 1 100); do kill -0 "$NSPAWN_PID" 2>/dev/null || break; sleep 0.2; done
	if kill -0 "$NSPAWN_PID" 2>/dev/null; then kill -KILL "$NSPAWN_PID"; fi
	wait "$NSPAWN_PID" 2>/dev/null || true
	NSPAWN_PID=''
}
cleanup() {
	local rc=$? c t
	if [ "$KEEP" = 1 ] && [ -n "$NSPAWN_PID" ]; then
		say "kept: nsenter -t $LEADER -a /bin/bash   (stop: nsenter -t $LEADER -a systemctl poweroff; rm -rf $WORK)"
		exit $rc
	fi
	if [ -n "$LEADER" ] && [ -n "$NSPAWN_PID" ]; then
		timeout 30 nsenter -t "$LEADER" -a -- journalctl -b --no-pager -o short-precise >"$LOGS/journal.txt" 2>&1 || true
	fi
	t=$(date +%s.%N)
	halt_container
	say "halted: $(elapsed "$t") s"
	if findmnt -rno TARGET | grep -q "^$ROOT"; then umount -R "$ROOT" 2>/dev/null || true; fi
	if [ "$failed" != 0 ] || [ $rc != 0 ]; then
		mkdir -p "${TMPDIR:-/tmp}/wsched-systemd-test-logs"
		rm -rf "${TMPDIR:-/tmp}/wsched-systemd-test-logs/last"
		cp -r "$LOGS" "${TMPDIR:-/tmp}/wsched-systemd-test-logs/last"
		say "logs kept in ${TMPDIR:-/tmp}/wsched-systemd-test-logs/last"
		tail -n 40 "$LOGS/checks.log" 2>/dev/null || true
	fi
	findmnt -rno TARGET | grep -q "^$ROOT" || rm -rf "$WORK"
	# the cgroups nspawn ran in, deepest first, once the container's are gone (which can take a moment
	# after a forced halt)
	for c in "${CGROUPS[@]}"; do
		for _ in $(seq 1 50); do
			find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
			[ -d "$c" ] || break
			sleep 0.2
		done
		[ ! -d "$c" ] || say "cgroup $c not empty: left in place"
	done
	exit $rc
}
trap cleanup EXIT
# as_user USER CMD: a shell command line as USER in a login shell (su -l: PAM, logind, XDG_RUNTIME_DIR),
# without WSCHED_SOCKET, as a person would type it.
as_user() { local u=$1; shift; inside su -l "$u" -c "$*"; }
main_pid() { inside systemctl show -p MainPID --value wsched.service; }

boot
T_BOOTED=$(date +%s.%N)

# --- install: the README's lines ---------------------------------------------------------------------------
# The first ```sh block of README.md's "## Install on Debian": `make …` ran on the host (make deb),
# `sudo …` lines run as root in the container from the directory that holds dist/ (sudo is a shim
# there: the root is root already), other lines later as_user alice. apt runs offline (--private-network):
# every dependency must already be in the bookworm root, none from another suite.
mkdir -p "$ROOT/root/src/dist"
cp "${debs[@]}" "$ROOT/root/src/dist/"
mapfile -t readme < <(awk '/^## Install on Debian/ { s = 1 } s && /^```sh/ { b = 1; next } b && /^```/ { exit } b' "$SRC/README.md" |
	sed -e 's/[[:space:]]\+#.*//' -e '/^[[:space:]]*$/d')
[ ${#readme[@]} -gt 0 ] || { bad "README.md: no sh block under '## Install on Debian'"; exit 1; }
printf '#!/bin/sh\nexec "$@"\n' >"$ROOT/usr/local/bin/sudo" && chmod 0755 "$ROOT/usr/local/bin/sudo"
printf 'APT::Get::Assume-Yes "true";\n' >"$ROOT/etc/apt/apt.conf.d/90wsched-test"
inside useradd -m -s /bin/sh alice
inside useradd -m -s /bin/sh bob
user_lines=()
t=$(date +%s.%N)
for line in "${readme[@]}"; do
	case $line in
	make\ *) ;;
	sudo\ *) check "README: $line" inside sh -c "cd /root/src && DEBIAN_FRONTEND=noninteractive $line" ;;
	*) user_lines+=("$line") ;;
	esac
done
say "install: $(elapsed "$t") s"
rm -f "$ROOT/usr/local/bin/sudo" "$ROOT/etc/apt/apt.conf.d/90wsched-test"
check "all four packages installed" inside sh -c 'for p in wsched wsched-backend-whisper wsched-backend-sherpa wsched-backend-exec; do dpkg-query -W -f="\${db:Status-Abbrev}\n" $p | grep -q "^ii"; done'
# apt marks an installed package that no configured archive (the root's $SUITE) offers as "local".
check "no package from another suite: nothing installed but $SUITE's packages and ours" inside sh -c \
	"! apt list --installed 2>/dev/null | grep ',local\]' | grep -v '^wsched'"
check "postinst: wsched.socket enabled and listening, wsched.service not yet started" inside sh -c \
	'systemctl is-enabled -q wsched.socket && systemctl is-active -q wsched.socket && ! systemctl is-active -q wsched.service'
check "sysusers: user wsched, groups wsched/video/render; alice in group wsched" inside sh -c \
	'getent passwd wsched && getent group wsched && getent group video && getent group render && id -nG alice | grep -qw wsched'
check "sysusers: no conflict with Debian's own groups (systemd-sysusers as at boot)" inside sh -c \
	'out=$(systemd-sysusers 2>&1); echo "$out"; ! echo "$out" | grep -i conflict'
check "tmpfiles: /run/wsched 0750 wsched:wsched; socket 0660 root:wsched" inside sh -c \
	'[ "$(stat -c "%a %U:%G" /run/wsched)" = "750 wsched:wsched" ] && [ "$(stat -c "%a %U:%G %F" /run/wsched/wsched.sock)" = "660 root:wsched socket" ]'
check "systemd-analyze verify: no warnings" inside sh -c 'out=$(systemd-analyze verify --man=no wsched.socket wsched.service 2>&1); echo "$out"; [ -z "$out" ]'
# As alice: for a non-root user an unset models dir would resolve under her home, so this shows the
# file's own value (the daemon's: the whisper model below is found there).
check "packaged configuration: models in /var/lib/wsched/models, no development plugin directory" as_user alice \
	'wsched config check | grep "/var/lib/wsched/models" && grep -x "dev_dirs = \[\]" /etc/wsched/wsched.toml'

# --- socket activation and discovery, as_user alice (group wsched) and bob (not) ------------------------------
t=$(date +%s.%N)
for line in "${user_lines[@]}"; do
	check "README as alice: $line (no WSCHED_SOCKET: finds /run/wsched/wsched.sock)" as_user alice "$line | grep -q socket-activated"
done
say "first connection to an answer: $(elapsed "$t") s"
check "alice without a login session (no XDG_RUNTIME_DIR) finds it too" inside runuser -u alice -- wsched status
check "Type=notify: active (running) with STATUS=" inside sh -c 'systemctl is-active -q wsched && systemctl show wsched -p StatusText | grep -q "StatusText=.*leases"'
check "bob (not in group wsched): the error names both sockets and the group to join" sh -c \
	"out=\$(timeout 60 nsenter -t $LEADER -a -- su -l bob -c 'wsched status' 2>&1); echo \"\$out\"; echo \"\$out\" | grep -q -e '/run/user/[0-9]*/wsched.sock' -e '/tmp/wsched-[0-9]*.sock' && echo \"\$out\" | grep -q '/run/wsched/wsched.sock (permission denied)' && echo \"\$out\" | grep -q 'join group wsched'"
check "StateDirectory: /var/lib/wsched/models made by the unit, owned by wsched" inside sh -c '[ "$(stat -c %U /var/lib/wsched/models)" = wsched ]'

# --- the sandbox ---------------------------------------------------------------------------------------------
P=$(main_pid)
WU=$(inside id -u wsched)
inside grep -E '^(Uid|NoNewPrivs|Seccomp|CapEff|CapBnd):' "/proc/$P/status" >"$LOGS/daemon-status.txt" || true
check "daemon runs as wsched, no capabilities, NoNewPrivs, seccomp filter" sh -c "grep -q '^Uid:[[:space:]]*${WU}[[:space:]]' $LOGS/daemon-status.txt && grep -q '^CapEff:.0000000000000000' $LOGS/daemon-status.txt && grep -q '^CapBnd:.0000000000000000' $LOGS/daemon-status.txt && grep -q '^NoNewPrivs:.1' $LOGS/daemon-status.txt && grep -q '^Seccomp:.2' $LOGS/daemon-status.txt"
check "ProtectSystem=strict: /etc read-only for the daemon" sh -c "timeout 30 nsenter -t $LEADER -a -- nsenter -t $P -m -- sh -c 'touch /etc/probe 2>&1' | grep -q 'Read-only file system'"
check "ProtectHome=yes: /home empty for the daemon" sh -c "timeout 30 nsenter -t $LEADER -a -- nsenter -t $P -m -- sh -c '[ -z \"\$(ls -A /home)\" ]'"
inside mknod /dev/wsched-probe c 10 237
check "DevicePolicy=closed is enforced in this container (BPF)" sh -c "! timeout 60 nsenter -t $LEADER -a -- systemd-run --wait -q -P -p DevicePolicy=closed -p User=wsched sh -c 'exec 3</dev/wsched-probe' && timeout 60 nsenter -t $LEADER -a -- systemd-run --wait -q -P -p User=wsched sh -c 'exec 3</dev/wsched-probe'"
inside rm -f /dev/wsched-probe
# The container has only a loopback interface (--private-network), so "other hosts are refused" is
# shown the other way round: IPAddressDeny=any is enforced here (loopback refused without the allow
# list), and IPAddressAllow=localhost lets the exec backend's loopback app through (the same
# connection succeeds). The unit's own settings are shown by systemctl.
LOOPBACK="import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); socket.create_connection(s.getsockname(), timeout=3).send(b'x'); s.accept()"
check "IPAddressDeny=any is enforced here, IPAddressAllow=localhost lets loopback through" sh -c \
	"! timeout 60 nsenter -t $LEADER -a -- systemd-run --wait -q -P -p IPAddressDeny=any -p User=wsched python3 -c \"$LOOPBACK\" && timeout 60 nsenter -t $LEADER -a -- systemd-run --wait -q -P -p IPAddressDeny=any -p IPAddressAllow=localhost -p User=wsched python3 -c \"$LOOPBACK\""
check "wsched.service: IPAddressDeny=any, IPAddressAllow=localhost, AF_UNIX AF_INET AF_INET6 only" inside sh -c \
	'show() { systemctl show wsched -p "$1" --value | tr " " "\n" | sort | tr "\n" " "; }
	 show IPAddressDeny; show IPAddressAllow; show RestrictAddressFamilies
	 [ "$(show IPAddressDeny)" = "0.0.0.0/0 ::/0 " ] && [ "$(show IPAddressAllow)" = "127.0.0.0/8 ::1/128 " ] &&
	 [ "$(show RestrictAddressFamilies)" = "AF_INET AF_INET6 AF_UNIX " ]'

inside systemd-analyze security --no-pager wsched.service >"$LOGS/security.txt" 2>&1 || true
EXPOSURE=$(sed -n 's/.*Overall exposure level for wsched.service: \([0-9.]*\).*/\1/p' "$LOGS/security.txt")
say "systemd-analyze security wsched.service (systemd $(inside systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p'), real PID 1): exposure ${EXPOSURE:-?}"
grep '✗' "$LOGS/security.txt" | sed 's/  \+/  /g' | sed 's/^/    /' || true
check "exposure ${EXPOSURE:-?} <= $MAX_EXPOSURE" awk -v e="${EXPOSURE:-99}" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e + 0 <= m + 0) }'

# --- a transcription through each packaged backend -----------------------------------------------------------
# Simulated GPUs (no NVIDIA driver in the container: the backends run on the CPU) and the exec app,
# added to the packaged configuration the way an administrator edits it; the models where the packaged
# configuration looks: the weightless whisper.cpp model and a generated SenseVoice model.
inside sed -i 's/^provider = "auto"$/provider = "sim"/' /etc/wsched/wsched.toml
cat >>"$ROOT/etc/wsched/wsched.toml" <<'EOF'

# --- added by systemd-test.sh ---
[[inventory.sim]]
name = "NVIDIA GeForce RTX 4090"
memory = "23.69GiB"
[[inventory.sim]]
name = "NVIDIA GeForce RTX 4090"
memory = "23.69GiB"

[[models.model]]
name = "sensevoice"
backend = "exec"
command = ["python3", "main.py"]
dir = "/srv/app"
env = { PYTHONDONTWRITEBYTECODE = "1" }
memory = "3GiB"
health = "/health"
protocol = "multipart"
path = "/api/v1/asr"
field = "files"
text_json_path = "result.0.text"
EOF
install -D -m 0644 "$SRC/plugins/execbackend/testdata/app/main.py" "$ROOT/srv/app/main.py"
install -m 0644 "$SHARED/models/whisper-empty/for-tests-ggml-tiny.bin" "$ROOT/var/lib/wsched/models/ggml-tiny.bin"
mkdir -p "$ROOT/var/lib/wsched/models/sensevoice-onnx"
(cd "$SRC" && timeout 300 go run packaging/test/gensensevoice/main.go "$ROOT/var/lib/wsched/models/sensevoice-onnx") >>"$LOGS/checks.log" 2>&1 ||
	bad "generate the SenseVoice model (go run packaging/test/gensensevoice/main.go)"
install -m 0644 -o "$(inside id -u alice)" "$SHARED/audio/jfk.wav" "$ROOT/home/alice/jfk.wav"
check "wsched config check (as alice) accepts the edited configuration" as_user alice 'wsched config check >/dev/null'
check "systemctl restart wsched" inside systemctl restart wsched
check "backend directories of the packaged daemon: /usr/lib/wsched/plugins only" as_user alice \
	'wsched backends | tee -a /dev/stderr | grep "^Backend directories" | grep -qx "Backend directories: /usr/lib/wsched/plugins"'
for m in tiny:whisper sensevoice:exec sensevoice-onnx:sherpa; do
	t=$(date +%s.%N)
	check "transcribe jfk.wav as alice through the $m backend (model ${m%%:*})" as_user alice "cd && wsched transcribe --model ${m%%:*} --format json jfk.wav"
	say "  ${m#*:}: $(elapsed "$t") s"
done
check "exec: the app answered on loopback (its transcript names the bytes it got)" as_user alice 'cd && wsched transcribe --model sensevoice jfk.wav | grep -q "bytes=352078"'
check "three warm backends in the unit's cgroup" inside sh -c 'systemctl status wsched --no-pager -l -n 0 | tee -a /dev/stderr | grep -c "/usr/lib/wsched/plugins/wsched-backend-\(whisper\|sherpa\|exec\)" | grep -qx 3'
check "each backend in a cgroup of its own under the unit (Delegate=yes)" inside sh -c 'n=$(systemd-cgls --no-pager -u wsched.service | grep -c "backend-l-"); [ "$n" -ge 3 ] && ! journalctl -u wsched -b --no-pager -o cat | grep -q "without a cgroup of its own"'

# --- enforcement (issue 27) ------------------------------------------------------------------------------------
# No GPU here: the packaged daemon finds the allocation cap where the package put it, takes `preload` for the
# simulated GPUs and says why not the stronger tiers; its backends get the cap in LD_PRELOAD.
check "enforcement: the packaged daemon finds /usr/lib/wsched/libwsched_cuda_cap.so, logs tier=preload and why" inside sh -c \
	'journalctl -u wsched -b --no-pager -o cat | grep "enforcement" | tee -a /dev/stderr | grep "tier=preload why=\"/usr/lib/wsched/libwsched_cuda_cap.so caps" | grep -q "not nvml-limits: .*; not mps: no MPS control daemon runs"'
say "  the daemon's choice: $(inside sh -c 'journalctl -u wsched -b --no-pager -o cat | grep -m1 "msg=enforcement gpu=0"' | sed 's/^.*msg=enforcement //')"
check "enforcement: a warm backend has the cap in LD_PRELOAD" inside sh -c \
	'for p in $(pgrep -f "[w]sched-backend-"); do tr "\0" "\n" <"/proc/$p/environ"; done | grep -qx "LD_PRELOAD=/usr/lib/wsched/libwsched_cuda_cap.so"'
# wsched run under systemd as PID 1: its child in a transient scope (Delegate=yes); a child that setsid's
# and would outlive the run ends with it, and so does the scope.
inside rm -f /tmp/run-cg /tmp/run-delegate /tmp/run-pid
check "wsched run -- sh -c 'setsid sleep 1000 &' ends" inside timeout 60 wsched run --memory 1GiB -- sh -c \
	'cat /proc/self/cgroup >/tmp/run-cg; systemctl show -p Delegate --value "$(basename "$(cut -d: -f3 /proc/self/cgroup)")" >/tmp/run-delegate; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >/tmp/run-pid'
check "wsched run: the child ran in a scope wsched-run-PID-PID.scope with Delegate=yes" inside sh -c \
	'cat /tmp/run-cg /tmp/run-delegate; grep -q "/wsched-run-[0-9]*-[0-9]*\.scope$" /tmp/run-cg && grep -qx yes /tmp/run-delegate'
check "wsched run: the setsid child is gone, and so is the scope" inside sh -c \
	'p=$(cat /tmp/run-pid); [ -n "$p" ] || exit 1; for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done; ! kill -0 "$p" 2>/dev/null && [ -z "$(systemctl list-units --all --no-legend "wsched-run-*")" ]'
# As a user (alice, login session): the scope comes from her user manager over her bus (or, without one, the run
# goes on without a cgroup of its own); either way the child's exit status comes back.
inside rm -f /tmp/alice-run-cg /tmp/alice-run-rc
as_user alice 'timeout 60 wsched run --memory 1GiB -- sh -c "cat /proc/self/cgroup >/tmp/alice-run-cg; exit 3"; echo $? >/tmp/alice-run-rc' \
	>>"$LOGS/alice-run.log" 2>&1 || true
say "  wsched run as alice: cgroup $(inside cat /tmp/alice-run-cg 2>/dev/null | tail -1)"
check "wsched run as alice: the child ran and its exit status (3) came back" inside sh -c \
	'[ -s /tmp/alice-run-cg ] && [ "$(cat /tmp/alice-run-rc)" = 3 ]'

# --- leases across restarts -----------------------------------------------------------------------------------
inside runuser -u alice -- sh -c 'eval "$(wsched lease --memory 2GiB --ttl 5m)"; exec sleep 25' >"$LOGS/alice-lease.log" 2>&1 &
for _ in $(seq 1 50); do as_user alice 'wsched leases' 2>/dev/null | grep -q granted && break; sleep 0.2; done
check "alice holds a lease" as_user alice 'wsched leases | grep -q granted'
t=$(date +%s.%N)
check "systemctl restart wsched with warm backends and a lease" inside systemctl restart wsched
say "restart: $(elapsed "$t") s"
check "no backend or app left from before the restart" inside sh -c '[ "$(pgrep -c -f "[p]ython3 main.py|[w]sched-backend-")" = 0 ]'
check "the lease survived the restart" as_user alice 'wsched leases | grep -q granted'
check "journal: leases recovered restored=1" inside sh -c 'journalctl -u wsched -b --no-pager -o cat | grep -q "leases recovered.*restored=1"'
# (the holder, sleep 25, ends by itself; the halt at the end stops anything left)

# --- watchdog -----------------------------------------------------------------------------------------------------
# The unit's WatchdogSec=30s shortened by a drop-in to keep the test short; the mechanism is the same.
mkdir -p "$ROOT/etc/systemd/system/wsched.service.d"
printf '[Service]\nWatchdogSec=5s\n' >"$ROOT/etc/systemd/system/wsched.service.d/watchdog.conf"
inside systemctl daemon-reload
inside systemctl restart wsched
P=$(main_pid)
t=$(date +%s.%N)
inside kill -STOP "$P"
newpid=$P
for _ in $(seq 1 60); do
	sleep 1
	newpid=$(main_pid)
	[ "$newpid" != "$P" ] && [ "$newpid" != 0 ] && inside systemctl is-active -q wsched && break
done
say "watchdog: SIGSTOP of pid $P, restarted as pid $newpid after $(elapsed "$t") s"
check "watchdog: timeout logged, restarted by Restart=on-failure" sh -c "timeout 30 nsenter -t $LEADER -a -- journalctl -u wsched -b --no-pager -o cat | grep -q 'Watchdog timeout' && [ '$newpid' != '$P' ] && timeout 30 nsenter -t $LEADER -a -- systemctl show wsched -p NRestarts | grep -q 'NRestarts=[1-9]'"
check "watchdog: the daemon answers again" as_user alice 'wsched status'
rm -rf "$ROOT/etc/systemd/system/wsched.service.d"
inside systemctl daemon-reload

# --- stop, purge ------------------------------------------------------------------------------------------------------
check "a warm backend again" as_user alice 'cd && wsched transcribe --model sensevoice jfk.wav'
t=$(date +%s.%N)
check "systemctl stop wsched: nothing left of the unit, the socket keeps listening" inside sh -c \
	'systemctl stop wsched && [ "$(pgrep -c -f "[p]ython3 main.py|[w]sched-backend-|[w]sched serve")" = 0 ] && systemctl is-active -q wsched.socket'
say "stop with a warm backend: $(elapsed "$t") s"
check "the next connection activates it again" as_user alice 'wsched status | grep -q socket-activated'
check "dpkg -P of the four packages: units stopped, files, state, conffile gone" inside sh -c \
	'dpkg -P wsched-backend-whisper wsched-backend-sherpa wsched-backend-exec wsched && ! systemctl is-active -q wsched.socket && ! systemctl is-active -q wsched && [ ! -e /usr/lib/wsched ] && [ ! -e /var/lib/wsched ] && [ ! -e /run/wsched ] && [ ! -e /etc/wsched/wsched.toml ] && [ ! -e /usr/bin/wsched ]'

say "exposure ${EXPOSURE:-?} (systemd-analyze security wsched.service under systemd as PID 1)"
say "total $(elapsed "$T_START") s (container part $(elapsed "$T_BOOTED") s); passed $pass, failed $failed"
[ "$failed" = 0 ]
