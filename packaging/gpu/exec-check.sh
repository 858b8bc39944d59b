#!/usr/bin/env bash
# exec-check.sh BIN OUT — the real-GPU check of the exec backend (issue 12), for a machine with an
# NVIDIA GPU and python3. BIN holds wsched and wsched-backend-exec (make build plugins, or go build);
# (and jfk.wav, else ../shared/audio/jfk.wav is used); OUT receives report.txt and the daemon's log. It runs the daemon on NVML with the SenseVoice-shaped
# test app (plugins/execbackend/testdata/app) as model "sensevoice", the app allocating 1 GiB through
# libcuda at start, and records: the app's environment as it saw it, cold and warm `wsched
# transcribe` of jfk.wav, the lease's PIDs and NVML figures (the app's memory counted against the
# lease), `wsched backends`, and that the app is gone with no lease left after the daemon stops.
set -euo pipefail
bin=$(realpath "${1:?usage: exec-check.sh BIN OUT}")
out=$(realpath "${2:?usage: exec-check.sh BIN OUT}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/wsched-exec-XXXXXX)
mkdir -p "$work/plugins" "$work/state" "$out"
install -m 0755 "$bin/wsched-backend-exec" "$work/plugins/"
audio="$bin/jfk.wav"
[ -e "$audio" ] || audio="$repo/../shared/audio/jfk.wav"
cat >"$work/wsched.toml" <<TOML
[daemon]
socket = "$work/wsched.sock"
state_dir = "$work/state"
log_level = "debug"
[inventory]
refresh_interval = "500ms"
[placement]
safety_factor = 1.0
reserved = "256MiB"
[backends]
plugin_dir = "$work/plugins"
dev_dirs = []
[[models.model]]
name = "sensevoice"
backend = "exec"
command = ["python3", "main.py"]
dir = "$repo/plugins/execbackend/testdata/app"
env = { APP_GPU_BYTES = "1073741824", APP_STATE_DIR = "$work", PYTHONDONTWRITEBYTECODE = "1" }
memory = "3GiB"
protocol = "openai"
TOML
export WSCHED_CONFIG="$work/wsched.toml"
ws() { "$bin/wsched" "$@"; }
report() { tee -a "$out/report.txt"; }
"$bin/wsched" serve >"$out/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true' EXIT
for _ in $(seq 100); do ws status >/dev/null 2>&1 && break; sleep 0.1; done
{
	echo "== nvidia-smi"; nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv
	for run in cold warm warm; do
		start=$(date +%s%N)
		text=$(ws transcribe --model sensevoice "$audio" 2>/dev/null)
		end=$(date +%s%N)
		echo "== $run: $(((end - start) / 1000000)) ms: $text"
	done
	echo "== app pid $(cat "$work/pid"); wsched leases --json (idle, kept alive)"
	ws leases --json
	echo "== nvidia-smi compute apps"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
	sleep 1.5
	echo "== wsched leases --json after a reading"; ws leases --json
	echo "== wsched status"; ws status
	echo "== wsched backends"; ws backends
} 2>&1 | report
app=$(cat "$work/pid")
kill "$daemon"; wait "$daemon" || true
trap - EXIT
{
	if [ -e "/proc/$app" ]; then echo "== app $app still runs after the daemon stopped"; else echo "== app $app gone after the daemon stopped"; fi
	echo "== nvidia-smi compute apps after stop"; nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} 2>&1 | report
rm -rf "$work"
