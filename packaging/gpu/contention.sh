#!/usr/bin/env bash
# contention.sh KIT OUT — issue 27's contention run, for a machine with an NVIDIA GPU (docs/enforcement.md).
# KIT is what `make gpu-kit` gathers (bin/wsched, bin/libwsched_cuda_cap.so beside it, hog.c, and for the
# overhead step bin/wsched-backend-whisper, models/, jfk.wav); OUT receives contention.md and the logs.
#
#   1. Which tier `auto` picks on this host, and why (the daemon's start log, `wsched gpus`).
#   2. Contention, once per tier in $TIERS (default: detect preload mps): a daemon with [enforcement] mode = TIER;
#      $CLIENTS honest clients (each `wsched run --memory ${LEASE_GIB}GiB`, allocating its lease less 1 GiB for its
#      context: half at once, the rest $PAUSE s later, as a job that loads its model and then grows its buffers),
#      then, while they pause, one lying client (`wsched run --memory 2GiB` allocating 20 GiB), all on GPU 0, all
#      holding for $HOLD s. A collateral OOM is an honest client that got CUDA_ERROR_OUT_OF_MEMORY (hog exits 3). Where the GPU is smaller than CLIENTS × LEASE_GIB + LIAR_ASK_GIB + 2 GiB, LEASE_GIB is lowered to fit
#      (and said in the report): the leases then fill the GPU and the liar's excess is what does not fit.
#   3. The preload cap's overhead on a whisper.cpp job: $JOB_RUNS transcriptions of jfk.wav with model base,
#      under mode = detect and mode = preload, one after the other, medians side by side. Needs the CUDA build
#      of whisper.cpp that check.sh makes (/tmp/wsched-gpu/prefix): run `bash check.sh KIT OUT0` first (or
#      WSCHED_GPU_STEPS=backends for the build alone); skipped without it.
set -euo pipefail
# shellcheck source=packaging/gpu/daemon-config.sh
. "$(dirname "${BASH_SOURCE[0]}")/daemon-config.sh"
kit=$(realpath "${1:?usage: contention.sh KIT OUT}")
out=$(realpath "${2:?usage: contention.sh KIT OUT}")
CLIENTS=${CLIENTS:-12}
LEASE_GIB=${LEASE_GIB:-9}
LIAR_ASK_GIB=${LIAR_ASK_GIB:-2}
LIAR_ALLOC_GIB=${LIAR_ALLOC_GIB:-20}
HOLD=${HOLD:-30}
PAUSE=${PAUSE:-15}
TIERS=${TIERS:-detect preload mps}
JOB_RUNS=${JOB_RUNS:-10}
work=/tmp/wsched-contention
whisper_prefix=/tmp/wsched-gpu/prefix
mkdir -p "$work" "$out"
GiB=$((1 << 30))
log() { printf '%s %s\n' "$(date +%T)" "$*" | tee -a "$out/steps.log"; }
ws() { timeout 600 "$kit/bin/wsched" --config "$work/wsched.toml" "$@"; }

cc -O2 -Wall -o "$work/hog" "$kit/hog.c" -ldl
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
need_mib=$(((CLIENTS * LEASE_GIB + LIAR_ASK_GIB + 2) * 1024))
if [ "$need_mib" -gt "$total_mib" ]; then
	LEASE_GIB=$(((total_mib / 1024 - LIAR_ASK_GIB - 2) / CLIENTS))
	log "GPU 0 has $total_mib MiB: lease per honest client lowered to $LEASE_GIB GiB"
fi
[ "$LEASE_GIB" -ge 2 ] || { log "GPU 0 too small for $CLIENTS clients"; exit 1; }

# write_config MODE [MODELS]: a daemon on GPU 0's real readings with [enforcement] mode = MODE.
write_config() {
	rm -rf "$work/state"
	mkdir -p "$work/plugins" "$work/models"
	{
		daemon_config_head "$work"
		cat <<EOF
[leases]
overrun = "warn"
[enforcement]
mode = "$1"
mps = "$([ "$1" = mps ] && echo manage || echo use)"
[backends]
plugin_dir = "$work/plugins"
dev_dirs = []
[models]
dir = "$work/models"
default = "base"
EOF
	} >"$work/wsched.toml"
}

start_daemon() { # start_daemon NAME
	"$kit/bin/wsched" serve --config "$work/wsched.toml" >"$out/$1-daemon.log" 2>&1 &
	daemon=$!
	for _ in $(seq 150); do
		ws status >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	log "daemon did not start ($1)"
	tail -30 "$out/$1-daemon.log"
	return 1
}

stop_daemon() {
	kill "$daemon" 2>/dev/null || true
	wait "$daemon" 2>/dev/null || true
}

# tier_of NAME: GPU 0's tier as the daemon reports it.
tier_of() { ws gpus --json 2>/dev/null | python3 -c 'import json,sys; g=json.load(sys.stdin); g=g["gpus"] if isinstance(g, dict) else g; print(g[0]["enforcement"]["tier"])' 2>/dev/null || echo "?"; }

# --- 1. auto ---
write_config auto
start_daemon auto
ws gpus >"$out/auto-gpus.txt" 2>&1 || true
grep 'msg=enforcement' "$out/auto-daemon.log" >"$out/auto-choice.txt" || true
auto_tier=$(tier_of)
stop_daemon
log "auto picked: $auto_tier ($(head -1 "$out/auto-choice.txt" | sed 's/^.*why=//'))"

# --- 2. contention per tier ---
printf '| tier asked | tier given | honest clients | collateral OOMs | liar | overrun events |\n|---|---|---|---|---|---|\n' >"$out/contention-table.md"
for tier in $TIERS; do
	write_config "$tier"
	start_daemon "$tier" || continue
	given=$(tier_of)
	ws gpus >"$out/$tier-gpus.txt" 2>&1 || true
	log "$tier: GPU 0 tier $given; $CLIENTS clients × $LEASE_GIB GiB, then a liar asking $LIAR_ASK_GIB GiB, allocating $LIAR_ALLOC_GIB GiB"
	for i in $(seq "$CLIENTS"); do
		(ws run --memory "${LEASE_GIB}GiB" --device cuda:0 --wait 2m --name "client-$i" -- \
			"$work/hog" $(((LEASE_GIB - 1) * GiB)) "$HOLD" $((256 << 20)) "$PAUSE" \
			>"$out/$tier-client-$i.txt" 2>&1; echo $? >"$out/$tier-client-$i.rc") &
	done
	sleep 5 # the honest clients hold their first halves and pause
	(ws run --memory "${LIAR_ASK_GIB}GiB" --device cuda:0 --name liar -- "$work/hog" $((LIAR_ALLOC_GIB * GiB)) "$HOLD" \
		>"$out/$tier-liar.txt" 2>&1; echo $? >"$out/$tier-liar.rc") &
	wait || true
	oom=0 ok=0
	for i in $(seq "$CLIENTS"); do
		case $(cat "$out/$tier-client-$i.rc") in 0) ok=$((ok + 1)) ;; 3) oom=$((oom + 1)) ;; esac
	done
	liar=$(sed -n 's/^pid [0-9]* //p' "$out/$tier-liar.txt" | head -1)
	overruns=$(grep -c 'overrun' "$out/$tier-daemon.log" || true)
	printf '| %s | %s | %d ok of %d | **%d** | %s (exit %s) | %s |\n' "$tier" "$given" "$ok" "$CLIENTS" "$oom" "${liar:-?}" \
		"$(cat "$out/$tier-liar.rc")" "$overruns" >>"$out/contention-table.md"
	log "$tier: $ok honest clients ok, $oom collateral OOMs"
	stop_daemon
done

# --- 3. the cap's overhead on a whisper.cpp job ---
overhead() {
	if [ ! -e "$whisper_prefix/lib/libwhisper.so.1" ] || [ ! -x "$kit/bin/wsched-backend-whisper" ]; then
		echo "skipped: no CUDA whisper.cpp in $whisper_prefix (run check.sh first)"
		return
	fi
	export LD_LIBRARY_PATH="$whisper_prefix/lib"
	local mode
	for mode in detect preload; do
		write_config "$mode"
		install -m 0755 "$kit/bin/wsched-backend-whisper" "$work/plugins/"
		cp "$kit/models/for-tests-ggml-base.bin" "$work/models/" # named as check.sh names them
		start_daemon "overhead-$mode" || return
		ws transcribe --model base "$kit/jfk.wav" >/dev/null 2>&1 || true # warm: the backend loads
		: >"$out/overhead-$mode.times"
		for _ in $(seq "$JOB_RUNS"); do
			local t0 t1
			t0=$(date +%s.%N)
			ws transcribe --model base "$kit/jfk.wav" >/dev/null 2>>"$out/overhead-$mode.err" || true
			t1=$(date +%s.%N)
			awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >>"$out/overhead-$mode.times"
		done
		echo "$mode: tier $(tier_of)"
		stop_daemon
	done
	python3 - "$out/overhead-detect.times" "$out/overhead-preload.times" <<'EOF'
import statistics, sys
d, p = ([float(x) for x in open(f)] for f in sys.argv[1:3])
md, mp = statistics.median(d), statistics.median(p)
print(f"median of {len(d)} jobs: detect {md:.4f} s, preload {mp:.4f} s, ratio {mp / md:.4f} ({100 * (mp / md - 1):+.2f} %)")
EOF
}
overhead >"$out/overhead.txt" 2>&1 || true

{
	echo "# Contention run (issue 27)"
	echo
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader -i 0 | sed 's/^/GPU 0: /'
	echo
	echo "auto picked \`$auto_tier\`: $(head -1 "$out/auto-choice.txt" | sed 's/^.*why=//')"
	echo
	echo "$CLIENTS honest clients × ${LEASE_GIB} GiB leases (each allocating $((LEASE_GIB - 1)) GiB, half, then the rest ${PAUSE} s later), one liar asking ${LIAR_ASK_GIB} GiB and allocating ${LIAR_ALLOC_GIB} GiB 5 s in, holding ${HOLD} s:"
	echo
	cat "$out/contention-table.md"
	echo
	echo "Shim overhead on a whisper.cpp job (base, jfk.wav):"
	echo
	sed 's/^/    /' "$out/overhead.txt"
} >"$out/contention.md"
log "done: $out/contention.md"
