# shellcheck shell=bash
# scenarios_dra.sh — kubelet-e2e.sh's DRA scenario, in the running cluster:
# `wsched k8s dra-driver` on the host (next to a host `wsched serve` over the
# same simulated GPUs), packaging/kubernetes/dra/deviceclass.yaml, and claims
# with consumable capacity "memory" (DRAConsumableCapacity: beta, on by
# default in 1.37). The lease's environment reaches the containers through
# CDI (containerd 2: the kubelet passes the claim's CDI devices in the CRI
# field containerd 1.6 dropped): each pod prints its environment, checked with
# kubectl logs. Foreign memory: the sim inventory takes its processes from the
# config, so the host daemon is restarted with one more (dra_foreign).

dra_slice() { K get resourceslice "${NODE}-gpu.wsched.io" -o jsonpath="$1"; }
dra_capacity() { dra_slice "{.spec.devices[?(@.name==\"$1\")].capacity.memory.value}"; }
dra_published() { [[ " $(dra_slice '{.spec.devices[*].name}') " = *" gpu-1 "*" gpu-5 "* ]]; }
dra_registered() { grep -q 'registered with the kubelet' "${WORK}/logs/dra.log"; }
pod_running() { [[ $(K get pod "$1" -o jsonpath='{.status.phase}') = Running ]]; }
claim_of() { K get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}'; }
claim_device() { K get resourceclaim "$(claim_of "$1")" -o jsonpath='{.status.allocation.devices.results[0].device}'; }
host_lease_bytes() { # host_lease_bytes GPU_INDEX: memory of the host daemon's DRA leases there, one a line
	WS leases --json | python3 -c "
import json,sys
for l in json.load(sys.stdin) or []:
  if l.get('state')=='granted' and (l.get('labels') or {}).get('k8s.claim') and l['gpu_index']==$1: print(l['memory_bytes'])"
}
host_lease_id() { # host_lease_id CLAIM_UID: the host daemon's lease for the claim
	WS leases --json | python3 -c "
import json,sys
for l in json.load(sys.stdin) or []:
  if l.get('state')=='granted' and (l.get('labels') or {}).get('k8s.claim')=='$1': print(l['id'])"
}
no_dra_leases() { [[ -z $(for i in 0 1 2 3 4 5 6 7; do host_lease_bytes "${i}"; done) ]]; }
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
	uid=$(K get resourceclaim "$(claim_of "${p}")" -o jsonpath='{.metadata.uid}')
	id=$(host_lease_id "${uid}")
	[[ -n ${uuid} && -n ${id} ]] || fail "${p}: no UUID for ${dev} (${uuid}) or no lease for claim ${uid} (${id})"
	for k in WSCHED_LEASE_ID="${id}" CUDA_VISIBLE_DEVICES="${uuid}" NVIDIA_VISIBLE_DEVICES="${uuid}" \
		SENSEVOICE_DEVICE=cuda:0 CUDA_DEVICE_ORDER=PCI_BUS_ID WSCHED_MEMORY_BYTES="${bytes}"; do
		want=${k#*=}
		v=$(pod_env "${p}" "${k%%=*}")
		[[ ${v} = "${want}" ]] || fail "${p}: ${k%%=*}='${v}' in the container, want '${want}' (CDI edits of claim ${uid} not applied)"
	done
	log "${p}: in the container: WSCHED_LEASE_ID=${id} CUDA_VISIBLE_DEVICES=${uuid} SENSEVOICE_DEVICE=cuda:0 WSCHED_MEMORY_BYTES=${bytes}"
}

# dra_foreign: 6 GiB of foreign memory on GPU 1 (a process without a lease)
# lowers gpu-1's published capacity by as much. The sim inventory reads its
# processes from the config only (tests change it in-process through
# inventory.Sim): the host daemon restarts with the process added, and the
# running driver republishes.
dra_foreign() {
	local gib=1073741824 cap1
	cap1=$(dra_capacity gpu-1)
	awk '/^\[\[inventory\.sim\]\]/ {n++}
		n == 2 && /^used = / {print "used = \"6.23GiB\""; next}
		{print}
		n == 2 && /^utilization = / {print "  [[inventory.sim.process]]\n  pid = 4242\n  name = \"foreign\"\n  used = \"6GiB\""}' \
		"${WORK}/wsched-sim.toml" >"${WORK}/wsched-sim-foreign.toml"
	grep -q 'name = "foreign"' "${WORK}/wsched-sim-foreign.toml" || fail "foreign process not added to GPU 1's sim config"
	stop wsched-host
	start wsched-host "${WORK}/bin/wsched" serve --config "${WORK}/wsched-sim-foreign.toml"
	wait_for 30 "host daemon (foreign process on GPU 1)" WS status
	timed "dra: 6 GiB foreign on GPU 1 published" wait_for 30 "gpu-1 capacity lowered by 6 GiB" capacity_below gpu-1 $((cap1 - 6 * gib))
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
	log "== DRA driver, consumable capacity"
	local gib=1073741824 cap5 p dev
	printf '%s' "$(cut -d, -f1 "${WORK}/pki/tokens.csv" | head -1)" >"${WORK}/pki/admin.token"
	start wsched-host "${WORK}/bin/wsched" serve --config "${WORK}/wsched-sim.toml"
	wait_for 30 "host daemon" WS status
	start dra "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" k8s dra-driver --node "${NODE}" \
		--api-server https://127.0.0.1:6443 --token-file "${WORK}/pki/admin.token" --ca-file "${WORK}/pki/ca.crt" \
		--cdi-dir "${WORK}/cdi"
	timed "dra: slice published" wait_for 60 "ResourceSlice with gpu-1 and gpu-5" dra_published
	timed "dra: registered with the kubelet" wait_for 60 "kubelet registration of gpu.wsched.io" dra_registered
	K apply -f "${REPO}/packaging/kubernetes/dra/deviceclass.yaml" >/dev/null
	log "published memory (bytes): $(dra_slice '{range .spec.devices[*]}{.name}={.capacity.memory.value} {end}')"

	# a local client's lease lowers what is published (GPU 5: 17.45 GiB available)
	cap5=$(dra_capacity gpu-5)
	start locallease "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" lease --memory 6GiB --device cuda:5 --hold
	timed "dra: local 6 GiB lease on GPU 5 published" wait_for 30 "gpu-5 capacity lowered by 6 GiB" capacity_below gpu-5 $((cap5 - 6 * gib))

	# two pods share GPU 5 through consumable capacity
	dra_claim_pod dra-share-a 4Gi 'device.attributes["gpu.wsched.io"].index == 5'
	dra_claim_pod dra-share-b 4Gi 'device.attributes["gpu.wsched.io"].index == 5'
	timed "dra: two 4 GiB pods on GPU 5 running" wait_for 120 "dra-share-a running" pod_running dra-share-a
	wait_for 120 "dra-share-b running" pod_running dra-share-b
	for p in dra-share-a dra-share-b; do [[ $(claim_device "${p}") = gpu-5 ]] || fail "${p}: claim on $(claim_device "${p}"), want gpu-5"; done
	[[ $(host_lease_bytes 5 | grep -c "^$((4 * gib))$") = 2 ]] || fail "want two 4 GiB DRA leases on GPU 5, got: $(host_lease_bytes 5 | tr '\n' ' ')"
	grep -q "CUDA_VISIBLE_DEVICES=GPU-" "${WORK}"/cdi/wsched.io-claim_*.json || fail "no CDI spec with the lease's env"
	for p in dra-share-a dra-share-b; do dra_env_arrived "${p}" $((4 * gib)); done
	[[ $(pod_env dra-share-a WSCHED_LEASE_ID) != "$(pod_env dra-share-b WSCHED_LEASE_ID)" ]] || fail "the two pods on GPU 5 got one lease"

	# 20 GiB (more than GPU 5 has left): lands on a GPU that holds it (GPU 1 or 6 here)
	dra_claim_pod dra-20gi 20Gi
	timed "dra: 20 GiB pod running" wait_for 120 "dra-20gi running" pod_running dra-20gi
	dev=$(claim_device dra-20gi)
	log "dra-20gi: claim on ${dev} (published $(dra_capacity "${dev}") bytes); with the device plugin the same ask failed admission"
	[[ ${dev} =~ ^gpu-[0-9]+$ && $(dra_capacity "${dev}") -ge $((20 * gib)) ]] || fail "dra-20gi on ${dev}: not a GPU that holds 20 GiB"
	[[ $(host_lease_bytes "${dev#gpu-}") = $((20 * gib)) ]] || fail "want a 20 GiB DRA lease on ${dev}, got: $(host_lease_bytes "${dev#gpu-}")"
	dra_env_arrived dra-20gi $((20 * gib))

	K delete pod dra-share-a dra-share-b dra-20gi --wait=false >/dev/null
	timed "dra: pods gone, leases released (unprepare)" wait_for 120 "DRA leases released" no_dra_leases
	stop locallease
	timed "dra: local lease released, gpu-5 published as before" wait_for 30 "gpu-5 capacity back" capacity_at_least gpu-5 "${cap5}"
	dra_foreign
	stop dra
	stop wsched-host
	log "dra: PASS"
}
