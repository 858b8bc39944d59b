# shellcheck shell=bash
# lib.sh — helpers of kubelet-e2e.sh: logging, timings, bounded waits, and the
# processes the e2e starts (recorded by PID; only those are ever stopped).

T_START=${EPOCHREALTIME}
declare -A TIMES

# secs START: seconds since START (an $EPOCHREALTIME), one decimal
secs() {
	local now=${EPOCHREALTIME} s=$1
	local d=$(((10#${now//[.,]/} - 10#${s//[.,]/}) / 100000))
	printf '%d.%d' $((d / 10)) $((d % 10))
}
log() { printf '[%6ss] %s\n' "$(secs "${T_START}")" "$*"; }
fail() {
	log "FAIL: $*"
	exit 1
}
# timed NAME CMD...: run CMD, record its seconds under NAME
timed() {
	local n=$1 s=${EPOCHREALTIME}
	shift
	"$@"
	TIMES[${n}]=$(secs "${s}")
	log "${n}: ${TIMES[${n}]}s"
}
# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.5 s, fail after SECONDS
wait_for() {
	local t=$1 what=$2 end
	shift 2
	end=$(($(date +%s) + t))
	until "$@" >/dev/null 2>&1; do
		[[ $(date +%s) -lt ${end} ]] || fail "timed out after ${t}s waiting for: ${what}"
		sleep 0.5
	done
}
# start NAME CMD...: in the background, log in $WORK/logs/NAME.log, PID in $WORK/pids/NAME
start() {
	local name=$1
	shift
	mkdir -p "${WORK}/logs" "${WORK}/pids"
	# shellcheck disable=SC2016 # $$ and $0 belong to the inner shell
	# (without the lock's descriptor: a process left behind must not hold it)
	nohup bash -c 'echo $$ > "$0"; exec "$@"' "${WORK}/pids/${name}" "$@" >"${WORK}/logs/${name}.log" 2>&1 </dev/null 9>&- &
	wait_for 5 "pid of ${name}" test -s "${WORK}/pids/${name}"
}
# stop NAME [SECONDS]: SIGTERM the recorded PID, SIGKILL after SECONDS (default 15)
stop() {
	local f="${WORK}/pids/$1" pid i
	[[ -s ${f} ]] || return 0
	pid=$(cat "${f}")
	if kill -0 "${pid}" 2>/dev/null; then
		kill "${pid}" 2>/dev/null || true
		for ((i = 0; i < ${2:-15} * 2; i++)); do
			kill -0 "${pid}" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "${pid}" 2>/dev/null; then
			log "$1 (${pid}) ignored SIGTERM: SIGKILL"
			kill -9 "${pid}" 2>/dev/null || true
		fi
	fi
	rm -f "${f}"
}
summary() {
	local k
	log "== timings"
	for k in "${!TIMES[@]}"; do printf '  %-58s %6ss\n' "${k}" "${TIMES[${k}]}"; done | sort
	log "total: $(secs "${T_START}")s"
}
