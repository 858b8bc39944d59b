#!/usr/bin/env bash
# check.sh KIT OUT — the real-GPU check of issue 13, for a machine with an NVIDIA GPU, nvcc,
# cmake, ninja and python3 with cupy (the device machine). KIT holds what `make gpu-kit` gathers:
# whisper-src.tgz (whisper.cpp's source), bin/wsched, bin/wsched-backend-whisper (built against a
# whisper.cpp of the same version), models/for-tests-ggml-*.bin and jfk.wav. OUT receives report.md
# and the logs.
#
# It builds whisper.cpp with CUDA for this GPU (kept in /tmp/wsched-gpu across runs on the same
# machine), then runs the daemon with the whisper backend from KIT against it and records:
#   1. first run of tiny…large on jfk.wav: the lease (estimator, nothing learned) against NVML's
#      per-process figure for the backend, and the backend's own buffers;
#   2. a bare CUDA process (cupy), against the context the daemon learned from its backends;
#   3. the second run, after learning;
#   4. CUDA OOM: a model entry whose memory is far too small, on a GPU another process has filled
#      but for 1.5 GiB for 25 s: the job's attempts and outcome.
# WSCHED_GPU_STEPS=backends: only the build and `wsched backends` (the device kinds a CUDA build reports).
set -euo pipefail
# shellcheck source=packaging/gpu/daemon-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/daemon-config.sh"
kit=$(realpath "${1:?usage: check.sh KIT OUT}")
out=$(realpath "${2:?usage: check.sh KIT OUT}")
work=/tmp/wsched-gpu
mkdir -p "$work" "$out"
log() { printf '%s %s\n' "$(date +%T)" "$*" | tee -a "$out/steps.log"; }

build_whisper() {
	if [ -e "$work/prefix/lib/libwhisper.so.1" ]; then
		log "whisper.cpp already built in $work/prefix"
		return
	fi
	local arch
	arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
	rm -rf "$work/src" "$work/build"
	mkdir -p "$work/src"
	tar -xzf "$kit/whisper-src.tgz" -C "$work/src"
	log "building whisper.cpp with CUDA for sm_$arch"
	cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
		-DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_NATIVE=OFF -DWHISPER_BUILD_EXAMPLES=OFF \
		-DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_SERVER=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" \
		-DCMAKE_INSTALL_LIBDIR=lib >"$out/cmake.log" 2>&1
	cmake --build "$work/build" -j "$(nproc)" >>"$out/cmake.log" 2>&1
	cmake --install "$work/build" >>"$out/cmake.log" 2>&1
	log "whisper.cpp built"
}

write_config() {
	mkdir -p "$work/models" "$work/plugins"
	rm -rf "$work/state"
	cp "$kit"/models/for-tests-ggml-*.bin "$work/models/" 2>/dev/null || true
	install -m 0755 "$kit/bin/wsched-backend-whisper" "$work/plugins/"
	{
		daemon_config_head "$work"
		cat <<EOF
[backends]
plugin_dir = "$work/plugins"
dev_dirs = []
keep_alive = "3s"
[models]
dir = "$work/models"
default = "tiny"
[[models.model]]
name = "large-too-small"
backend = "whisper.cpp"
path = "$work/models/for-tests-ggml-large.bin"
memory = "200MiB"
EOF
	} >"$work/wsched.toml"
}

start_daemon() {
	"$kit/bin/wsched" serve --config "$work/wsched.toml" >"$out/daemon.log" 2>&1 &
	daemon=$!
	for _ in $(seq 100); do
		if ws status >/dev/null 2>&1; then
			log "daemon up (pid $daemon)"
			return
		fi
		sleep 0.2
	done
	log "daemon did not start"
	tail -30 "$out/daemon.log"
	exit 1
}

ws() { "$kit/bin/wsched" --config "$work/wsched.toml" "$@"; }

# one_pass NAME: each model once on jfk.wav; records lease, NVML and the backend's report per model.
one_pass() {
	local pass=$1 m
	for m in tiny base small medium large; do
		local t0 t1
		t0=$(date +%s.%N)
		ws transcribe --model "$m" --format json "$kit/jfk.wav" >"$out/$pass-$m.result.json" 2>>"$out/$pass.err"
		t1=$(date +%s.%N)
		nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$out/$pass-$m.smi" || true
		ws leases --json >"$out/$pass-$m.leases.json" || true
		ws backends --json >"$out/$pass-$m.backends.json" || true
		awk -v m="$m" -v a="$t0" -v b="$t1" 'BEGIN { printf "%s %.2f\n", m, b - a }' >>"$out/$pass.times"
		sleep 4 # keep_alive 3s: the backend stops, its lease ends, its peak is learned
	done
	ws jobs --json >"$out/$pass-jobs.json" || true
}

bare_context() {
	python3 - >"$out/bare-context.txt" 2>&1 <<'EOF' || true
import os, subprocess, cupy
cupy.cuda.runtime.memGetInfo()  # creates the context, allocates nothing
def used():
    rows = subprocess.check_output(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]).decode()
    return [r for r in rows.splitlines() if r.split(",")[0].strip() == str(os.getpid())]
print("bare context (memGetInfo only):", used())
x = cupy.zeros(1)
print("after one allocation:", used())
EOF
}

oom_scenario() {
	log "OOM scenario: filling the GPU but for 1.5 GiB for 25 s"
	python3 - >"$out/hog.txt" 2>&1 <<'EOF' &
import time, cupy
free, total = cupy.cuda.runtime.memGetInfo()
p = cupy.cuda.runtime.malloc(free - 1536 * 2**20)
print("hog holds", (free - 1536 * 2**20) >> 20, "MiB of", total >> 20, flush=True)
time.sleep(25)
cupy.cuda.runtime.free(p)
print("hog freed at", time.strftime("%T"), flush=True)
EOF
	local hog=$!
	sleep 5
	ws gpus >"$out/oom-gpus.txt" 2>&1 || true
	local t0 t1
	t0=$(date +%s.%N)
	ws transcribe --model large-too-small --format json "$kit/jfk.wav" >"$out/oom-result.json" 2>"$out/oom.err" || true
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "oom job wall %.2f s\n", b - a }' >>"$out/steps.log"
	wait "$hog" || true
	ws jobs --json >"$out/oom-jobs.json" || true
}

build_whisper
export LD_LIBRARY_PATH="$work/prefix/lib"
if [ "${WSCHED_GPU_STEPS:-all}" = backends ]; then # the build and what `wsched backends` sees of it only
	mkdir -p "$kit/models"
	write_config
	start_daemon
	ws backends >"$out/backends.txt" 2>&1 || true
	ws backends --json >"$out/backends.json" 2>&1 || true
	kill "$daemon" || true
	wait "$daemon" || true
	log "done"
	exit 0
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || true
bare_context
write_config
start_daemon
ws gpus >"$out/gpus.txt" 2>&1 || true
ws backends >"$out/backends.txt" 2>&1 || true
log "first pass"
one_pass first
log "second pass"
one_pass second
ws estimate --model "$work/models/for-tests-ggml-large.bin" --beam 5 --explain >"$out/estimate-large-explain.txt" 2>&1 || true
oom_scenario
kill "$daemon" || true
wait "$daemon" || true
python3 "$kit/report.py" "$out" >"$out/report.md" 2>"$out/report.err" || true
log "done"
