#!/bin/bash
# kubelet-e2e.sh — wsched's Kubernetes node agent against a REAL kubelet and a
# real single-node cluster (`make k8s-e2e`, part of `make test`).
#
#   standalone: containerd + kubelet (no API server), the wsched daemon and
#               `wsched k8s device-plugin` on the host, static pods.
#   cluster:    etcd + kube-apiserver + kube-controller-manager + kube-scheduler
#               + kubelet, and packaging/kubernetes/*.yaml patched only where
#               this GPU-less, registry-less node needs it (e2e/patch).
#
# Usage: kubelet-e2e.sh [all|standalone|cluster|dra|teardown]   (default all)
#
#   dra:        in the cluster, the DRA driver from dra/driver.yaml (its
#               DaemonSet, service account, RBAC, admission policy; the node
#               labelled wsched.io/dra=true), claims with consumable capacity
#               "memory", a crash of the driver and its reconciliation
#               (scenarios_dra.sh); part of all unless E2E_DRA=0.
#
# Needs root, Debian 12 (apt: runc containernetworking-plugins; apt-get
# download: busybox-static etcd-server), Go and the Go module proxy.
# containerd is 2.x, built through the module proxy (build-containerd.sh):
# kubelet 1.37 hands DRA's CDI devices to the runtime only in the CRI field
# Debian's containerd 1.6.20 drops, so the pods would start without the lease's
# environment; kubelet 1.38 needs containerd 2 anyway.
# No image registry: pause, busybox and wsched images are built here by hand
# and imported with `ctr images import`.
#
# Env: WORK        scratch dir (state, logs)          (default $TMPDIR/wsched-k8s-e2e)
#      K8S_VERSION                                    (default 1.37.2: k8s.io/kubelet v0.37.2 of go.mod)
#      K8S_CACHE   binaries and debs, kept between runs (default /var/cache/wsched-k8s);
#                  the binaries live in $K8S_CACHE/v$K8S_VERSION, built by build-k8s.sh when missing
#      CONTAINERD_VERSION                             (default 2.4.2)
#      CONTAINERD_CACHE  containerd, its runc shim and ctr, kept between runs
#                  (default /var/cache/wsched-containerd); in $CONTAINERD_CACHE/v$CONTAINERD_VERSION,
#                  built by build-containerd.sh when missing
#      KEEP=1      leave everything running at the end (no teardown)
#      WSCHED_BIN  a wsched binary to test instead of building the checkout's
#      E2E_DRA=0   leave the DRA scenario out of all
#
# Only processes this script starts are stopped, by the PIDs it recorded. It
# refuses to run on a host with a kubelet or containerd of its own. Host state
# it touches, all undone by teardown: /var/lib/kubelet (and its self bind
# mount), /var/lib/containerd, /run/containerd, /var/lib/cni, /var/log/pods,
# /var/log/containers, /usr/libexec/kubernetes, /run/netns and /run/cdi (if it created them),
# the kubepods cgroups, the cni0 bridge, the kubelet's iptables chains
# (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and the sysctls the
# kubelet sets (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops, ...).
# Ports (127.0.0.1): 2379/2380 etcd, 6443, 10248/10250/10255, 10257/10259.
#
# Findings baked in (Debian 12, cgroup v1, no systemd as PID 1, root without
# CAP_SYS_RESOURCE): the kubelet needs failCgroupV1: false; containerd needs
# restrict_oom_score_adj; cgroupfs driver on both sides (containerd's runc
# SystemdCgroup = false, which containerd 2 reports through RuntimeConfig;
# containerd 1.6 lacked that call and kubelet 1.37 fell back to its own
# cgroupDriver); Debian's runc 1.1.5 does for containerd 2.4; stop the
# apiserver before etcd, or it hangs in shutdown.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "${HERE}/../../.." && pwd)
WORK=${WORK:-${TMPDIR:-/tmp}/wsched-k8s-e2e}
K8S_VERSION=${K8S_VERSION:-1.37.2}
K8S_CACHE=${K8S_CACHE:-/var/cache/wsched-k8s}
K8S_BIN=${K8S_CACHE}/v${K8S_VERSION}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.4.2}
CONTAINERD_CACHE=${CONTAINERD_CACHE:-/var/cache/wsched-containerd}
CD_BIN=${CONTAINERD_CACHE}/v${CONTAINERD_VERSION}
NODE=$(hostname | tr '[:upper:]' '[:lower:]')
KUBELET_DIR=/var/lib/kubelet
OWNED=/run/wsched-k8s-e2e.owner # WORK of the run that owns the host's kubelet state
K8S_NEED=(kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl)
[[ ${1:-all} != standalone ]] || K8S_NEED=(kubelet) # the binaries the scenario needs
# shellcheck source=packaging/kubernetes/e2e/lib.sh
. "${HERE}/lib.sh"
# shellcheck source=packaging/kubernetes/e2e/host.sh
. "${HERE}/host.sh"
# shellcheck source=packaging/kubernetes/e2e/scenarios.sh
. "${HERE}/scenarios.sh"
# shellcheck source=packaging/kubernetes/e2e/scenarios_dra.sh
. "${HERE}/scenarios_dra.sh"

K() { "${K8S_BIN}/kubectl" --kubeconfig "${WORK}/pki/admin.kubeconfig" "$@"; }
WS() { "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" "$@"; }
CTR() { "${CD_BIN}/ctr" -n k8s.io "$@"; }

finish() {
	local rc=$?
	if [[ -z ${KEEP:-} ]]; then timed teardown teardown; fi
	summary
	if [[ ${rc} -ne 0 ]]; then
		log "logs: ${WORK}/logs"
		local f
		for f in "${WORK}"/logs/*.log; do
			[[ -s ${f} ]] || continue
			echo "---- tail ${f}"
			tail -n 15 "${f}"
		done
	fi
	exit "${rc}"
}

mode=${1:-all}
case ${mode} in
standalone | cluster | dra | all)
	[[ $(id -u) = 0 ]] || fail "needs root"
	mkdir -p "${K8S_CACHE}"
	exec 9>"${K8S_CACHE}/e2e.lock"
	if ! flock -n 9; then
		log "waiting for ${K8S_CACHE}/e2e.lock (another kubelet-e2e, or a process one left: fuser ${K8S_CACHE}/e2e.lock)"
		flock -w 1800 9 || fail "another kubelet-e2e holds ${K8S_CACHE}/e2e.lock"
	fi
	claim_host
	trap finish EXIT
	setup
	case ${mode} in
	standalone) timed "scenario: standalone" standalone ;;
	cluster) timed "scenario: cluster" cluster ;;
	dra)
		cluster_up
		timed "scenario: dra" dra
		;;
	all)
		timed "scenario: standalone" standalone
		if [[ ${E2E_DRA:-1} = 1 ]]; then
			timed "scenario: cluster" cluster keep
			timed "scenario: dra" dra
		else
			timed "scenario: cluster" cluster
		fi
		;;
	esac
	log "PASS"
	;;
teardown)
	# Only the state of a run of this script: without its owner file (lost in a
	# reboot), FORCE=1 says the host's kubelet and containerd state is the e2e's.
	if [[ -s ${OWNED} ]]; then
		WORK=$(cat "${OWNED}")
	elif [[ -z ${FORCE:-} ]]; then
		echo "no ${OWNED}: nothing of a kubelet-e2e run to tear down (FORCE=1 to remove ${KUBELET_DIR}, /var/lib/containerd, ... anyway)" >&2
		exit 0
	fi
	teardown
	;;
*)
	echo "usage: $0 [all|standalone|cluster|dra|teardown]" >&2
	exit 2
	;;
esac
