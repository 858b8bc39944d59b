# shellcheck shell=bash
# scenarios_dra.sh — kubelet-e2e.sh's DRA scenario, in the running cluster:
# the driver as the project ships it, packaging/kubernetes/dra/driver.yaml
# (DaemonSet wsched-dra: `wsched serve` + `wsched k8s dra-driver` with its
# service account, RBAC and own-node admission policy) and
# dra/deviceclass.yaml, patched by e2e/patch like the node agent's manifests
# (and the driver's pod on the host network, told the API server's
# 127.0.0.1:6443: no kube-proxy here). Labelling the node wsched.io/dra=true
# moves it from the device plugin's DaemonSet to the driver's. Claims with
# consumable capacity "memory" (DRAConsumableCapacity: beta, on by default in
# 1.37); the lease's environment reaches the containers through CDI
# (containerd 2), checked with kubectl logs of each pod's `env | sort`.
# A crash of the driver (dra_crash), and foreign memory (dra_foreign: the
# sim inventory reads its processes from the ConfigMap).

KS() { K -n wsched-system "$@"; }
# The pod's daemon socket, seen from the host: its emptyDir, through a
# symlink (the kubelet's path is longer than a unix socket address may be).
DRA_SOCK=
WD() { "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" --socket "${DRA_SOCK}" "$@"; }
dra_pod() { KS get pods -l app.kubernetes.io/name=wsched-dra -o jsonpath='{.items[0].metadata.name}'; }
dra_pod_running() { [[ $(KS get pods -l app.kubernetes.io/name=wsched-dra -o jsonpath='{.items[0].status.phase}') = Running ]]; }
dra_find_sock() {
	DRA_SOCK=${WORK}/run/dra-daemon.sock
	ln -sfn "${KUBELET_DIR}/pods/$(KS get pod "$(dra_pod)" -o jsonpath='{.metadata.uid}')/volumes/kubernetes.io~empty-dir/socket/wsched.sock" "${DRA_SOCK}"
}
drv() { KS get pod "$(dra_pod)" -o jsonpath="{.status.containerStatuses[?(@.name==\"dra-driver\")]$1}"; }
drv_running() { [[ -n $(drv .state.running.startedAt) ]]; }
# drv_listening: a driver process serves the kubelet's socket (after a
# SIGKILL the socket file stays, refusing connections)
drv_listening() {
	python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "${KUBELET_DIR}/plugins/gpu.wsched.io/dra.sock" 2>/dev/null
}
drv_log() { KS logs "$(dra_pod)" -c dra-driver; }
drv_restarted() { [[ $(drv .restartCount) -gt $1 ]] && drv_running && drv_listening; } # drv_restarted COUNT_BEFORE
agent_gone() { [[ -z $(KS get pods -l app.kubernetes.io/name=wsched -o name) ]]; }

dra_slice() { K get resourceslice "${NODE}-gpu.wsched.io" -o jsonpath="$1"; }
dra_capacity() { dra_slice "{.spec.devices[?(@.name==\"$1\")].capacity.memory.value}"; }
dra_published() { [[ " $(dra_slice '{.spec.devices[*].name}') " = *" gpu-1 "*" gpu-5 "* ]]; }
dra_registered() { drv_log | grep -q 'registered with the kubelet'; }
dra_reconciled() { drv_log | grep -q 'reconciled prepared claims'; }
pod_running() { [[ $(K get pod "$1" -o jsonpath='{.status.phase}') = Running ]]; }
claim_of() { K get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
claim_uid() { K get resourceclaim "$(claim_of "$1")" -o jsonpath='{.metadata.uid}'; }
claim_gone() { ! K get resourceclaim "$1" >/dev/null 2>&1; }
claim_device() { K get resourceclaim "$(claim_of "$1")" -o jsonpath='{.status.allocation.devices.results[0].device}'; }
dra_leases() { # dra_leases: the pod daemon's granted DRA leases, "claim-uid lease-id gpu-index bytes expires-unix" a line
	WD leases --json | python3 -c "
import datetime,json,re,sys
def unix(t):
  if not t: return 0
  t=re.sub(r'(\.\d{6})\d+', r'\1', t).replace('Z', '+00:00')
  return datetime.datetime.fromisoformat(t).timestamp()
for l in json.load(sys.stdin) or []:
  c=(l.get('labels') or {}).get('k8s.claim')
  if l.get('state')=='granted' and c: print(c, l['id'], l['gpu_index'], l['memory_bytes'], unix(l.get('expires')))"
}
dra_lease_bytes() { dra_leases | awk -v g="$1" '$3 == g {print $4}'; } # dra_lease_bytes GPU_INDEX
dra_lease_id() { dra_leases | awk -v c="$1" '$1 == c {print $2}'; }   # dra_lease_id CLAIM_UID
no_dra_leases() { [[ -z $(dra_leases) ]]; }
dra_lease_expires() { dra_leases | awk -v c="$1" '$1 == c {print $5}'; } # dra_lease_expires CLAIM_UID
# lease_renewed_after CLAIM_UID UNIX: the claim's lease now expires later than UNIX
lease_renewed_after() { dra_leases | awk -v c="$1" -v t="$2" '$1 == c && $5 > t {ok = 1} END {exit !ok}'; }
capacity_below() { [[ $(dra_capacity "$1") -le $2 ]]; }
capacity_at_least() { [[ $(dra_capacity "$1") -ge $2 ]]; }
pod_env() { K logs "$1" | sed -n "s/^$2=//p"; } # pod_env POD VAR: as the container printed it
pod_printed_env() { K logs "$1" | grep -q '^PATH='; }

# dra_env_arrived POD BYTES: the claim's lease environment, as the driver
# wrote it into the claim's CDI spec, is in the container's environment.
dra_env_arrived() {
	local p=$1 bytes=$2 dev uuid uid id v k want
	wait_for 30 "${p} printed its environment" pod_printed_env "${p}"
	dev=$(claim_device "${p}")
	uuid=$(dra_slice "{.spec.devices[?(@.name==\"${dev}\")].attributes.uuid.string}")
	uid=$(claim_uid "${p}")
	id=$(dra_lease_id "${uid}")
	[[ -n ${uuid} && -n ${id} ]] || fail "${p}: no UUID for ${dev} (${uuid}) or no lease for claim ${uid} (${id})"
	for k in WSCHED_LEASE_ID="${id}" CUDA_VISIBLE_DEVICES="${uuid}" NVIDIA_VISIBLE_DEVICES="${uuid}" \
		SENSEVOICE_DEVICE=cuda:0 CUDA_DEVICE_ORDER=PCI_BUS_ID WSCHED_MEMORY_BYTES="${bytes}"; do
		want=${k#*=}
		v=$(pod_env "${p}" "${k%%=*}")
		[[ ${v} = "${want}" ]] || fail "${p}: ${k%%=*}='${v}' in the container, want '${want}' (CDI edits of claim ${uid} not applied)"
	done
	log "${p}: in the container: WSCHED_LEASE_ID=${id} CUDA_VISIBLE_DEVICES=${uuid} SENSEVOICE_DEVICE=cuda:0 WSCHED_MEMORY_BYTES=${bytes}"
}

# dra_forbidden_none: the driver's service account was refused no API call
# (a verb missing from its ClusterRole shows here even where the driver
# works around it, as start-up reconciliation does by retrying).
dra_forbidden_none() {
	local bad
	bad=$(drv_log | grep -m3 '403 Forbidden\|forbidden:' || true)
	[[ -z ${bad} ]] || fail "the API server refused the driver's service account: ${bad}"
}

# dra_own_node: the ValidatingAdmissionPolicy of driver.yaml keeps the
# driver's token to its node's slice. With a token of the driver's service
# account bound to its pod (so naming the node, as the pod's own), a
# server-side dry run creating a slice of another node is denied, one of
# this node passes; a token bound to no pod names no node and is denied.
dra_own_node() {
	local tok out
	tok=$(KS create token wsched-dra-driver --bound-object-kind Pod --bound-object-name "$(dra_pod)" --bound-object-uid "$(KS get pod "$(dra_pod)" -o jsonpath='{.metadata.uid}')" --duration 10m)
	dra_test_slice() { printf 'apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: e2e-%s}\nspec: {driver: gpu.wsched.io, nodeName: %s, pool: {name: %s, generation: 1, resourceSliceCount: 1}, devices: []}\n' "$1" "$1" "$1"; }
	out=$(dra_test_slice other-node | K --token "${tok}" create --dry-run=server -f - 2>&1) && fail "the driver's token wrote another node's slice: ${out}"
	[[ ${out} = *"may not write the ResourceSlice of node other-node"* ]] || fail "another node's slice: want the own-node policy's denial, got: ${out}"
	out=$(dra_test_slice "${NODE}" | K --token "${tok}" create --dry-run=server -f - 2>&1) || fail "the driver's token may not write its own node's slice: ${out}"
	tok=$(KS create token wsched-dra-driver --duration 10m)
	out=$(dra_test_slice "${NODE}" | K --token "${tok}" create --dry-run=server -f - 2>&1) && fail "a token without a node wrote a slice: ${out}"
	[[ ${out} = *"token names no node"* ]] || fail "a token without a node: want the policy's denial, got: ${out}"
	log "dra: own-node policy: another node's slice denied, its own allowed, a token without a node denied"
}

# dra_deploy: the node agent's DaemonSet up (kept from the cluster scenario,
# or applied), driver.yaml applied, the node labelled: the agent's pod
# leaves, wsched-dra's starts, publishes and registers.
dra_deploy() {
	node_gpu
	if ! KS get ds/wsched >/dev/null 2>&1; then
		patched "${WORK}/wsched-agent.yaml" rbac.yaml configmap.yaml daemonset.yaml
		K apply -f "${WORK}/wsched-agent.yaml" >/dev/null
	fi
	KS rollout status ds/wsched --timeout=120s >/dev/null
	patched "${WORK}/wsched-dra.yaml" dra/driver.yaml dra/deviceclass.yaml
	K apply -f "${WORK}/wsched-dra.yaml" | sed 's/^/    /'
	[[ -z $(KS get pods -l app.kubernetes.io/name=wsched-dra -o name) ]] || fail "wsched-dra runs on a node without wsched.io/dra=true"
	K label node "${NODE}" wsched.io/dra=true >/dev/null
	timed "dra: node labelled, the device plugin's pod gone" wait_for 90 "the wsched pod leaves ${NODE}" agent_gone
	timed "dra: wsched-dra running" wait_for 90 "wsched-dra pod running" dra_pod_running
	dra_find_sock
	timed "dra: slice published" wait_for 60 "ResourceSlice with gpu-1 and gpu-5" dra_published
	timed "dra: registered with the kubelet" wait_for 60 "kubelet registration of gpu.wsched.io" dra_registered
	# the first publish follows the start-up reconciliation: both with the service account's token
	dra_forbidden_none
	dra_reconciled || fail "the driver's start-up reconciliation did not complete: $(drv_log | grep -m1 reconcil)"
	wait_for 30 "the pod's daemon socket" WD status
	log "published memory (bytes): $(dra_slice '{range .spec.devices[*]}{.name}={.capacity.memory.value} {end}')"
}

# dra_kill_driver: SIGKILL the dra-driver container's process through
# containerd (a crash: the daemon in the pod's other container keeps
# running and holding the leases).
dra_kill_driver() {
	local id
	id=$(drv .containerID)
	[[ ${id} = containerd://* ]] || fail "no dra-driver container (${id})"
	CTR tasks kill --signal SIGKILL "${id#containerd://}" 2>>"${WORK}/logs/ctr-kill.log" || fail "ctr tasks kill ${id}"
}

# dra_crash: the driver killed while three claims are prepared, and killed
# again once the kubelet has restarted it, so that the kubelet backs its
# next restart off (CrashLoopBackOff, 10 s). Meanwhile (its socket refusing
# connections all along) dra-share-b is
# deleted with its claim (forced: the API server forgets both while the
# driver is down; the kubelet cannot unprepare). The restarted driver
# reconciles: dra-share-b's lease released, dra-share-a's and dra-20gi's
# kept with the SAME lease IDs, no claim with two leases.
dra_crash() {
	local ua ub ubig la lb lbig r0 cb line c e s=${EPOCHREALTIME}
	ua=$(claim_uid dra-share-a) ub=$(claim_uid dra-share-b) ubig=$(claim_uid dra-20gi) cb=$(claim_of dra-share-b)
	la=$(dra_lease_id "${ua}") lb=$(dra_lease_id "${ub}") lbig=$(dra_lease_id "${ubig}")
	[[ -n ${la} && -n ${lb} && -n ${lbig} ]] || fail "leases before the crash: a=${la} b=${lb} 20gi=${lbig}"
	dra_forbidden_none
	r0=$(drv .restartCount)
	dra_kill_driver
	wait_for 60 "the kubelet restarts the killed driver" drv_restarted "${r0}"
	dra_kill_driver
	K delete pod dra-share-b --grace-period=0 --force >/dev/null 2>&1
	wait_for 30 "claim ${cb} deleted" claim_gone "${cb}"
	! drv_listening || fail "the driver was back before claim ${cb} was gone: not deleted while it was down"
	log "dra: driver killed (twice), dra-share-b and claim ${cb} deleted while it is down"
	wait_for 60 "the driver restarted after its backoff" drv_restarted $((r0 + 1))
	wait_for 30 "the restarted driver reconciled" dra_reconciled
	# shellcheck disable=SC2034 # TIMES (lib.sh) is printed at the end
	TIMES["dra: crash, deletion while down, reconciled"]=$(secs "${s}")
	line=$(drv_log | grep 'reconciled prepared claims')
	log "dra: restarted driver: ${line}"
	wait_for 30 "the deleted claim's lease released" test -z "$(dra_lease_id "${ub}")"
	[[ $(dra_lease_id "${ua}") = "${la}" ]] || fail "dra-share-a's lease: $(dra_lease_id "${ua}") after the restart, ${la} before"
	[[ $(dra_lease_id "${ubig}") = "${lbig}" ]] || fail "dra-20gi's lease: $(dra_lease_id "${ubig}") after the restart, ${lbig} before"
	[[ $(dra_leases | wc -l) = 2 ]] || fail "want 2 DRA leases after the restart, got: $(dra_leases | tr '\n' ';')"
	[[ ${line} = *'"kept":2'* ]] || fail "the restarted driver did not keep both prepared claims: ${line}"
	grep -q "${ua}" "${KUBELET_DIR}/plugins/gpu.wsched.io/checkpoint.json" || fail "dra-share-a not in the driver's checkpoint"
	! grep -q "${ub}" "${KUBELET_DIR}/plugins/gpu.wsched.io/checkpoint.json" || fail "the deleted claim is still in the driver's checkpoint"
	pod_running dra-share-a || fail "dra-share-a stopped running"
	# adopted, not just left alone: the restarted driver renews the kept leases
	# (the killed one cannot; unrenewed they would expire after lease_ttl)
	for c in "${ua}" "${ubig}"; do
		e=$(dra_lease_expires "${c}")
		wait_for 30 "claim ${c}'s lease renewed by the restarted driver" lease_renewed_after "${c}" "${e}"
	done
	log "dra: after the restart: ${lb} (deleted claim) released; ${la} and ${lbig} kept; 2 DRA leases"
}

# dra_foreign: 6 GiB of foreign memory on GPU 1 (a process without a lease)
# lowers gpu-1's published capacity by as much. The sim inventory reads its
# processes from the config only (tests change it in-process through
# inventory.Sim): the ConfigMap gets the process added and the DaemonSet is
# restarted (daemon and driver: a new pod).
dra_foreign() {
	local gib=1073741824 cap1
	cap1=$(dra_capacity gpu-1)
	KS get configmap wsched-config -o jsonpath='{.data.wsched\.toml}' >"${WORK}/wsched-pod.toml"
	awk '/^\[\[inventory\.sim\]\]/ {n++}
		n == 2 && /^used = / {print "used = \"6.23GiB\""; next}
		{print}
		n == 2 && /^utilization = / {print "  [[inventory.sim.process]]\n  pid = 4242\n  name = \"foreign\"\n  used = \"6GiB\""}' \
		"${WORK}/wsched-pod.toml" >"${WORK}/wsched-pod-foreign.toml"
	grep -q 'name = "foreign"' "${WORK}/wsched-pod-foreign.toml" || fail "foreign process not added to GPU 1's sim config"
	KS create configmap wsched-config --from-file=wsched.toml="${WORK}/wsched-pod-foreign.toml" --dry-run=client -o yaml | K apply -f - >/dev/null
	KS rollout restart ds/wsched-dra >/dev/null
	timed "dra: DaemonSet restarted with a foreign process" KS rollout status ds/wsched-dra --timeout=120s
	wait_for 60 "the new wsched-dra pod running" dra_pod_running
	dra_find_sock
	timed "dra: 6 GiB foreign on GPU 1 published" wait_for 60 "gpu-1 capacity lowered by 6 GiB" capacity_below gpu-1 $((cap1 - 6 * gib))
	log "dra: foreign 6 GiB on GPU 1: published gpu-1 ${cap1} -> $(dra_capacity gpu-1) bytes"
}

dra_claim_pod() { # dra_claim_pod POD MEMORY [CEL]: a claim template and a pod using it
	local sel=""
	[[ -z ${3:-} ]] || sel=$(printf '\n            selectors: [{cel: {expression: %s}}]' "'$3'")
	K apply -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: default}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: wsched-gpu-memory
            capacity: {requests: {memory: $2}}${sel}
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $1}]
  containers:
    - {name: main, image: localhost/busybox:local, command: [sh, -c, "env | sort; exec sleep 3600"], resources: {claims: [{name: gpu}]}}
YAML
}

dra() {
	log "== DRA driver from dra/driver.yaml, consumable capacity"
	local gib=1073741824 cap5 p dev
	dra_deploy
	dra_own_node

	# a local client's lease lowers what is published (GPU 5: 17.45 GiB available)
	cap5=$(dra_capacity gpu-5)
	start locallease "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" --socket "${DRA_SOCK}" lease --memory 6GiB --device cuda:5 --hold
	timed "dra: local 6 GiB lease on GPU 5 published" wait_for 30 "gpu-5 capacity lowered by 6 GiB" capacity_below gpu-5 $((cap5 - 6 * gib))

	# two pods share GPU 5 through consumable capacity
	dra_claim_pod dra-share-a 4Gi 'device.attributes["gpu.wsched.io"].index == 5'
	dra_claim_pod dra-share-b 4Gi 'device.attributes["gpu.wsched.io"].index == 5'
	timed "dra: two 4 GiB pods on GPU 5 running" wait_for 120 "dra-share-a running" pod_running dra-share-a
	wait_for 120 "dra-share-b running" pod_running dra-share-b
	for p in dra-share-a dra-share-b; do [[ $(claim_device "${p}") = gpu-5 ]] || fail "${p}: claim on $(claim_device "${p}"), want gpu-5"; done
	[[ $(dra_lease_bytes 5 | grep -c "^$((4 * gib))$") = 2 ]] || fail "want two 4 GiB DRA leases on GPU 5, got: $(dra_lease_bytes 5 | tr '\n' ' ')"
	grep -q "CUDA_VISIBLE_DEVICES=GPU-" /var/run/cdi/wsched.io-claim_*.json || fail "no CDI spec with the lease's env in /var/run/cdi"
	for p in dra-share-a dra-share-b; do dra_env_arrived "${p}" $((4 * gib)); done
	[[ $(pod_env dra-share-a WSCHED_LEASE_ID) != "$(pod_env dra-share-b WSCHED_LEASE_ID)" ]] || fail "the two pods on GPU 5 got one lease"

	# 20 GiB (more than GPU 5 has left): lands on a GPU that holds it (GPU 1 or 6 here)
	dra_claim_pod dra-20gi 20Gi
	timed "dra: 20 GiB pod running" wait_for 120 "dra-20gi running" pod_running dra-20gi
	dev=$(claim_device dra-20gi)
	log "dra-20gi: claim on ${dev} (published $(dra_capacity "${dev}") bytes); with the device plugin the same ask failed admission"
	[[ ${dev} =~ ^gpu-[0-9]+$ && $(dra_capacity "${dev}") -ge $((20 * gib)) ]] || fail "dra-20gi on ${dev}: not a GPU that holds 20 GiB"
	[[ $(dra_lease_bytes "${dev#gpu-}") = $((20 * gib)) ]] || fail "want a 20 GiB DRA lease on ${dev}, got: $(dra_lease_bytes "${dev#gpu-}")"
	dra_env_arrived dra-20gi $((20 * gib))

	dra_crash

	K delete pod dra-share-a dra-20gi --wait=false >/dev/null
	timed "dra: pods gone, leases released (unprepare)" wait_for 120 "DRA leases released" no_dra_leases
	stop locallease
	timed "dra: local lease released, gpu-5 published as before" wait_for 30 "gpu-5 capacity back" capacity_at_least gpu-5 "${cap5}"
	dra_forbidden_none
	dra_foreign
	dra_forbidden_none
	log "dra: PASS"
}
