# shellcheck shell=bash
# host.sh — kubelet-e2e.sh's host: packages, binaries, images, containerd, and
# the teardown that leaves the host as it was.

# claim_host refuses a host with a kubelet or containerd of its own, and
# clears what an earlier, killed run of this script left.
claim_host() {
	if [[ -s ${OWNED} ]]; then
		local mine=${WORK}
		WORK=$(cat "${OWNED}")
		log "an earlier run (${WORK}) left its state: tearing it down"
		teardown
		WORK=${mine}
	fi
	local d
	for d in "${KUBELET_DIR}" /var/lib/containerd /run/containerd; do
		[[ ! -e ${d} ]] || fail "${d} exists: this host has a kubelet or containerd of its own (or a run killed before a reboot left it: FORCE=1 make k8s-e2e-teardown)"
	done
	rm -rf "${WORK}"
	mkdir -p "${WORK}"
	echo "${WORK}" >"${OWNED}"
}

# apt_install PKG...: from the host's own sources (apt-get update first where the lists lack them)
apt_install() {
	local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@")
	"${install[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && "${install[@]}" >/dev/null; }
}

# debs: busybox-static and etcd-server, downloaded and unpacked (not
# installed: no init script starts an etcd), cached in K8S_CACHE/debs.
debs() {
	local d=${K8S_CACHE}/debs
	rm -rf "${d}.new"
	mkdir -p "${d}.new"
	(cd "${d}.new" && apt-get download -q busybox-static etcd-server >/dev/null 2>&1) ||
		{ apt-get update -q >/dev/null && (cd "${d}.new" && apt-get download -q busybox-static etcd-server >/dev/null); }
	dpkg -x "${d}.new"/busybox-static_*.deb "${d}.new/busybox"
	dpkg -x "${d}.new"/etcd-server_*.deb "${d}.new/etcd"
	rm -rf "${d}"
	mv "${d}.new" "${d}"
}

# build_wsched builds the checkout's wsched, or takes WSCHED_BIN (an older
# build, to show what a fix changed).
build_wsched() {
	if [[ -n ${WSCHED_BIN:-} ]]; then
		cp "${WSCHED_BIN}" "${WORK}/bin/wsched"
		return
	fi
	(cd "${REPO}" && go build -trimpath -o "${WORK}/bin/wsched" ./cmd/wsched)
}

setup() {
	mkdir -p "${WORK}/bin" "${WORK}/manifests" "${WORK}/out" "${WORK}/state" "${WORK}/run"
	local need=() p c
	for p in runc containernetworking-plugins; do dpkg -s "${p}" >/dev/null 2>&1 || need+=("${p}"); done
	if [[ ${#need[@]} -gt 0 ]]; then timed "apt-get install ${need[*]}" apt_install "${need[@]}"; fi
	for c in containerd containerd-shim-runc-v2 ctr; do
		if [[ ! -x ${CD_BIN}/${c} ]]; then
			timed "build containerd v${CONTAINERD_VERSION} (cold)" "${HERE}/build-containerd.sh" "${CONTAINERD_VERSION}" "${CD_BIN}"
			break
		fi
	done
	if [[ ! -x ${K8S_CACHE}/debs/busybox/bin/busybox || ! -x ${K8S_CACHE}/debs/etcd/usr/bin/etcd ]]; then
		timed "apt-get download busybox-static etcd-server" debs
	fi
	for c in "${K8S_NEED[@]}"; do
		if [[ ! -x ${K8S_BIN}/${c} ]]; then
			timed "build kubernetes v${K8S_VERSION} (cold)" "${HERE}/build-k8s.sh" "${K8S_VERSION}" "${K8S_BIN}"
			break
		fi
	done
	timed "build wsched" build_wsched
	timed "build images" build_images
	containerd_config
	save_sysctls
	[[ -d /run/netns ]] || echo 1 >"${WORK}/netns.created" # containerd creates it for pod network namespaces
	[[ -d /run/cdi ]] || echo 1 >"${WORK}/cdi.created" # a DRA driver in the cluster writes its CDI specs there
	# the shim is found on PATH: the cached build's first
	start containerd env PATH="${CD_BIN}:${PATH}" "${CD_BIN}/containerd" --config "${WORK}/containerd.toml"
	wait_for 20 "containerd" CTR version
	timed "import images" import_images
	{
		printf '[daemon]\nsocket = "%s/run/wsched.sock"\nstate_dir = "%s/state/host"\n\n' "${WORK}" "${WORK}"
		printf '[kubernetes]\nunit = "1GiB"\ninterval = "2s"\nlease_ttl = "1m"\n\n'
		sed -n '/^\[inventory\]/,$p' "${REPO}/testdata/sim-8x4090.toml"
	} >"${WORK}/wsched-sim.toml"
}

# mkimage REF OUT.tar ROOTFS ENTRYPOINT_JSON [CMD_JSON]: a one-layer docker-archive
mkimage() {
	local ref=$1 out=$2 root=$3 ep=$4 cmd=${5:-null} w diff cfg
	w=$(mktemp -d)
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "${root}" -cf "${w}/layer.tar" .
	diff=$(sha256sum "${w}/layer.tar" | cut -d' ' -f1)
	printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":%s,"Cmd":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "${ep}" "${cmd}" "${diff}" >"${w}/config.json"
	cfg=$(sha256sum "${w}/config.json" | cut -d' ' -f1)
	mv "${w}/config.json" "${w}/${cfg}.json"
	mkdir "${w}/${diff}"
	mv "${w}/layer.tar" "${w}/${diff}/"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "${cfg}" "${ref}" "${diff}" >"${w}/manifest.json"
	tar -C "${w}" -cf "${out}" manifest.json "${cfg}.json" "${diff}"
	rm -rf "${w}"
}

build_images() {
	local i=${WORK}/img a lib
	rm -rf "${i}"
	mkdir -p "${i}/pause" "${i}/bb/bin" "${i}/bb/etc" "${i}/bb/tmp"
	(cd "${HERE}/pause" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags '-s -w' -o "${i}/pause/pause" .)
	cp "${K8S_CACHE}/debs/busybox/bin/busybox" "${i}/bb/bin/"
	for a in sh env sort sleep cat ls ps grep; do ln -s busybox "${i}/bb/bin/${a}"; done
	echo 'root:x:0:0:root:/root:/bin/sh' >"${i}/bb/etc/passwd"
	echo 'root:x:0:' >"${i}/bb/etc/group"
	chmod 1777 "${i}/bb/tmp"
	cp -a "${i}/bb" "${i}/ws"
	mkdir -p "${i}/ws/usr/local/bin" "${i}/ws/run/wsched"
	cp "${WORK}/bin/wsched" "${i}/ws/usr/local/bin/"
	for lib in $(ldd "${WORK}/bin/wsched" | grep -o '/[^ ]*'); do
		mkdir -p "${i}/ws$(dirname "${lib}")"
		cp -L "${lib}" "${i}/ws${lib}"
	done
	mkimage localhost/pause:local "${i}/pause.tar" "${i}/pause" '["/pause"]'
	mkimage localhost/busybox:local "${i}/busybox.tar" "${i}/bb" null '["sh"]'
	mkimage localhost/wsched:local "${i}/wsched.tar" "${i}/ws" '["/usr/local/bin/wsched"]'
}

import_images() {
	local t
	# (stderr to a log: ctr 2.x warns of cgroup v1's deprecation on every call)
	for t in pause busybox wsched; do
		CTR images import "${WORK}/img/${t}.tar" >/dev/null 2>"${WORK}/logs/ctr-import.log" ||
			fail "ctr images import ${t}: $(cat "${WORK}/logs/ctr-import.log")"
	done
}

containerd_config() {
	mkdir -p "${WORK}/cni"
	cat >"${WORK}/cni/10-bridge.conflist" <<'JSON'
{"cniVersion":"0.4.0","name":"k8s-pod-network","plugins":[
 {"type":"bridge","bridge":"cni0","isGateway":false,"ipMasq":false,
  "ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]]}}]}
JSON
	# containerd 2's config format (version 3): the CRI plugin split into
	# cri.v1.images and cri.v1.runtime. CDI is always on since 2.4 (enable_cdi
	# is gone); cdi_spec_dirs are its defaults, driver.yaml's --cdi-dir among them.
	cat >"${WORK}/containerd.toml" <<TOML
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "${WORK}/containerd-opt"
# NRI (on by default in 2.x) would leave /var/run/nri/nri.sock behind
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/pause:local"
[plugins."io.containerd.cri.v1.runtime"]
  # root here lacks CAP_SYS_RESOURCE: runc cannot write oom_score_adj -998
  # for the sandbox ("can't get final child's PID from pipe: EOF")
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
    # RuntimeClass "nvidia" of the manifests: plain runc (no GPU, no NVIDIA toolkit)
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${WORK}/cni"
TOML
}

# The kubelet (protectKernelDefaults: false) sets vm.overcommit_memory=1,
# kernel.panic=10, kernel.panic_on_oops=1, kernel.keys.root_max*: saved before
# the first kubelet start, put back at teardown.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
save_sysctls() {
	local k
	[[ -s ${WORK}/sysctl.orig ]] && return 0
	for k in "${SYSCTLS[@]}"; do echo "${k}=$(sysctl -n "${k}")"; done >"${WORK}/sysctl.orig"
}
restore_sysctls() {
	if [[ -s ${WORK}/sysctl.orig ]]; then sysctl -q -p "${WORK}/sysctl.orig" && rm -f "${WORK}/sysctl.orig"; fi
}
# iptables_cleanup removes the chains the kubelet creates (KUBE-FIREWALL: the
# localnet guard; the canaries; the hint).
iptables_cleanup() {
	local t tb
	for t in iptables ip6tables; do
		command -v "${t}" >/dev/null || continue
		while "${t}" -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
		while "${t}" -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
		"${t}" -F KUBE-FIREWALL 2>/dev/null || true
		"${t}" -X KUBE-FIREWALL 2>/dev/null || true
		for tb in filter nat mangle; do "${t}" -t "${tb}" -X KUBE-KUBELET-CANARY 2>/dev/null || true; done
		"${t}" -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
	done
}

stop_containers() {
	local id
	[[ -S /run/containerd/containerd.sock ]] || return 0
	for id in $(CTR tasks ls -q 2>/dev/null); do CTR tasks kill -s KILL "${id}" 2>/dev/null || true; done
	sleep 1
	for id in $(CTR containers ls -q 2>/dev/null); do
		CTR tasks rm -f "${id}" >/dev/null 2>&1 || true
		CTR containers rm "${id}" >/dev/null 2>&1 || true
	done
}

teardown() {
	log "== teardown"
	local n h
	rm -f "${WORK}/manifests/"* 2>/dev/null || true
	for n in locallease plugin wsched-host kubelet scheduler controller-manager; do stop "${n}"; done
	stop apiserver 30
	stop etcd # after the apiserver: without etcd it hangs in shutdown
	if [[ -s ${WORK}/pids/containerd ]]; then stop_containers; fi
	stop containerd
	awk '{print $2}' /proc/mounts | { grep -E "^(${KUBELET_DIR}|/run/containerd|/var/lib/containerd|/run/netns/cni-)" || true; } | sort -r |
		while read -r m; do umount "${m}" 2>/dev/null || umount -l "${m}"; done
	# pod network namespaces of sandboxes killed above (not through the CRI):
	# unmounted, their files stay
	find /run/netns -maxdepth 1 -name 'cni-*' -type f -empty -delete 2>/dev/null || true
	ip link del cni0 2>/dev/null || true
	if [[ -s ${WORK}/netns.created && -d /run/netns ]]; then
		rmdir /run/netns 2>/dev/null || true
	fi
	rm -f "${WORK}/netns.created"
	if [[ -s ${WORK}/cdi.created ]]; then rm -rf /run/cdi; fi
	rm -f "${WORK}/cdi.created"
	iptables_cleanup
	restore_sysctls
	for h in /sys/fs/cgroup/*/kubepods; do
		if [[ -d ${h} ]]; then find "${h}" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
	done
	rm -rf "${KUBELET_DIR}" /var/lib/containerd /run/containerd /var/lib/cni /var/log/pods /var/log/containers \
		/usr/libexec/kubernetes "${WORK}/etcd-data" "${WORK}/state" "${WORK}/run" "${WORK}/img"
	rm -f "${OWNED}"
}
