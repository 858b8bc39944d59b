# shellcheck shell=bash
# scenarios.sh — kubelet-e2e.sh's two scenarios: a standalone kubelet with
# static pods, and a single-node cluster with the project's manifests.

kubelet_config() { # kubelet_config FILE [standalone]
	cat >"$1" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false          # cgroup v1 host: 1.35+ refuses to start by default
cgroupDriver: cgroupfs       # as containerd's runc (SystemdCgroup = false), which it reports
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 10255
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
failSwapOn: false
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100   # never GC the hand-imported images: nothing can be pulled
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
YAML
	if [[ ${2:-} = standalone ]]; then printf 'staticPodPath: %s\nfileCheckFrequency: 1s\n' "${WORK}/manifests" >>"$1"; fi
}

# ---------------------------------------------------------- registrations ----
# The kubelet logs every Register call it gets, and refuses a second one for a
# plugin still connected ("device plugin already connected").
kubelet_registrations() { grep -c 'Got registration request from device plugin with resource' "${WORK}/logs/kubelet.log" || true; }
kubelet_refusals() { grep -c 'Error connecting to device plugin client\|device plugin already connected' "${WORK}/logs/kubelet.log" || true; }
# one_registration: after a kubelet (re)start the plugin registered exactly
# once. Extra registrations came within milliseconds of the restart; 3 s (one
# plugin interval and more) leaves room for late ones to show.
one_registration() {
	wait_for 60 "a registration with the new kubelet" test "$(kubelet_registrations)" -ge 1
	sleep 3
	local n r
	n=$(kubelet_registrations)
	r=$(kubelet_refusals)
	log "kubelet after its restart: ${n} registration(s), ${r} refused"
	[[ ${n} = 1 && ${r} = 0 ]] || fail "want exactly one registration after the kubelet restart, got ${n} (${r} refused)"
}

# ------------------------------------------------------------- standalone ----
static_pod() { # static_pod NAME UNITS
	cat >"${WORK}/manifests/$1.yaml" <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: main
    image: localhost/busybox:local
    command: ["sh", "-c", "env | sort > /out/$1.env; exec sleep 3600"]
    resources: {limits: {wsched.io/gpu-memory: "$2"}}
    volumeMounts: [{name: out, mountPath: /out}]
  volumes: [{name: out, hostPath: {path: ${WORK}/out, type: Directory}}]
YAML
}
# pod_status PREFIX: phase, reason and message of the kubelet's pods named PREFIX* (read-only port)
pod_status() {
	curl -fsS http://127.0.0.1:10255/pods | python3 -c "
import json,sys; d=json.load(sys.stdin)
for p in d['items'] or []:
  if p['metadata']['name'].startswith('$1'): print(p['status'].get('phase'), p['status'].get('reason'), p['status'].get('message',''))"
}
pod_count() { curl -fsS http://127.0.0.1:10255/pods | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"] or []))'; }
no_static_pods() { [[ $(pod_count) = 0 ]]; }
rejected() { pod_status "$1" | grep -q UnexpectedAdmissionError; }
running() { pod_status "$1" | grep -q '^Running'; }
no_leases() { WS leases 2>/dev/null | grep -q '^no leases'; }
kubelet_healthy() { curl -fsS http://127.0.0.1:10248/healthz; }
plugin_86() { grep -q 'resourceName="wsched.io/gpu-memory" totalCount=86 healthyCount=86' "${WORK}/logs/kubelet.log"; }
start_kubelet_standalone() {
	start kubelet "${K8S_BIN}/kubelet" --config="${WORK}/kubelet-standalone.yaml" --v=2
	wait_for 60 "kubelet healthz" kubelet_healthy
}
restart_kubelet_standalone() {
	stop kubelet
	start_kubelet_standalone
	wait_for 60 "registration after restart" plugin_86
}

standalone() {
	log "== standalone kubelet"
	local env=${WORK}/out/gpu-consumer.env
	rm -f "${WORK}/manifests/"* "${WORK}/out/"*
	kubelet_config "${WORK}/kubelet-standalone.yaml" standalone
	start wsched-host "${WORK}/bin/wsched" serve --config "${WORK}/wsched-sim.toml"
	timed "standalone: kubelet healthy" start_kubelet_standalone
	start plugin "${WORK}/bin/wsched" --config "${WORK}/wsched-sim.toml" k8s device-plugin --grace 5s
	timed "standalone: plugin registered, 86 devices" wait_for 30 "kubelet: 86 healthy wsched.io/gpu-memory" plugin_86

	static_pod gpu-consumer 2
	timed "standalone: static pod running with the lease's env" wait_for 90 "gpu-consumer env" test -s "${env}"
	grep -E '^(WSCHED_|CUDA_VISIBLE|NVIDIA_VISIBLE|SENSEVOICE)' "${env}" | sed 's/^/    /'
	grep -q '^WSCHED_MEMORY_BYTES=2147483648$' "${env}" || fail "no 2 GiB lease env in the container"
	grep -q '^CUDA_VISIBLE_DEVICES=GPU-' "${env}" || fail "no CUDA_VISIBLE_DEVICES"
	WS leases | sed 's/^/    /'

	static_pod gpu-too-big 30
	wait_for 60 "gpu-too-big rejected" rejected gpu-too-big
	log "30 units: $(pod_status gpu-too-big | cut -c1-220)"

	timed "standalone: kubelet restart, plugin registered again" restart_kubelet_standalone
	one_registration
	wait_for 60 "gpu-consumer still running after the kubelet restart" running gpu-consumer

	rm -f "${WORK}/manifests/"*
	timed "standalone: pods gone, lease released" wait_for 90 "leases released" no_leases
	wait_for 60 "static pods gone" no_static_pods
	stop plugin
	stop kubelet
	stop wsched-host
	log "standalone: PASS"
}

# ---------------------------------------------------------------- cluster ----
pki() {
	local p=${WORK}/pki admin kubelet who tok
	rm -rf "${p}"
	mkdir -p "${p}"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "${p}/ca.key" -out "${p}/ca.crt" -days 2 -subj /CN=e2e-ca 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout "${p}/apiserver.key" -out "${p}/apiserver.csr" -subj /CN=kube-apiserver 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >"${p}/ext.cnf"
	openssl x509 -req -in "${p}/apiserver.csr" -CA "${p}/ca.crt" -CAkey "${p}/ca.key" -CAcreateserial \
		-out "${p}/apiserver.crt" -days 2 -extfile "${p}/ext.cnf" 2>/dev/null
	openssl genrsa -out "${p}/sa.key" 2048 2>/dev/null
	openssl rsa -in "${p}/sa.key" -pubout -out "${p}/sa.pub" 2>/dev/null
	admin=$(openssl rand -hex 16)
	kubelet=$(openssl rand -hex 16)
	# the kubelet is system:node:<node> (Node authorizer + NodeRestriction), the rest system:masters
	printf '%s,admin,admin,system:masters\n%s,system:node:%s,kubelet,system:nodes\n' "${admin}" "${kubelet}" "${NODE}" >"${p}/tokens.csv"
	for who in admin kubelet; do
		if [[ ${who} = admin ]]; then tok=${admin}; else tok=${kubelet}; fi
		printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster: {server: "https://127.0.0.1:6443", certificate-authority: %s}\nusers:\n- name: %s\n  user: {token: "%s"}\ncontexts:\n- name: e2e\n  context: {cluster: e2e, user: %s}\ncurrent-context: e2e\n' \
			"${p}/ca.crt" "${who}" "${tok}" "${who}" >"${p}/${who}.kubeconfig"
	done
}
apiserver_ready() { [[ $(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:6443/readyz) = 200 ]]; }
node_ready() { [[ $(K get node "${NODE}" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') = True ]]; }
allocatable_86() { [[ $(K get node "${NODE}" -o jsonpath='{.status.allocatable.wsched\.io/gpu-memory}') = 86 ]]; }
ds_leases() { K -n wsched-system exec ds/wsched -c daemon -- wsched leases --socket /run/wsched/wsched.sock; }
ds_no_leases() { ds_leases | grep -q '^no leases'; }
ask_rejected() { [[ $(K get pod "$1" -o jsonpath='{.status.reason}') = UnexpectedAdmissionError ]]; }
ask_unschedulable() { K get pod "$1" -o jsonpath='{.status.conditions[0].message}' | grep -q 'Insufficient wsched.io/gpu-memory'; }
start_kubelet_cluster() {
	start kubelet "${K8S_BIN}/kubelet" --config="${WORK}/kubelet-cluster.yaml" --kubeconfig="${WORK}/pki/kubelet.kubeconfig" --v=2
}
ds_ready() { K -n wsched-system rollout status ds/wsched --timeout=120s >/dev/null && wait_for 60 "allocatable 86" allocatable_86; }
restart_kubelet_cluster() {
	stop kubelet
	start_kubelet_cluster
	wait_for 60 "kubelet healthz" kubelet_healthy
	wait_for 90 "86 devices registered after the restart" plugin_86
	wait_for 90 "allocatable 86 after the restart" allocatable_86
}
start_control_plane() {
	local p=${WORK}/pki
	rm -rf "${WORK}/etcd-data"
	start etcd "${K8S_CACHE}/debs/etcd/usr/bin/etcd" --data-dir "${WORK}/etcd-data" --name default \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster default=http://127.0.0.1:2380
	start apiserver "${K8S_BIN}/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 --bind-address=127.0.0.1 --secure-port=6443 \
		--advertise-address="$(ip -4 route get 1.1.1.1 | grep -o 'src [0-9.]*' | cut -d' ' -f2)" \
		--tls-cert-file="${p}/apiserver.crt" --tls-private-key-file="${p}/apiserver.key" --client-ca-file="${p}/ca.crt" \
		--token-auth-file="${p}/tokens.csv" --service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="${p}/sa.pub" --service-account-signing-key-file="${p}/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
		--allow-privileged=true
	wait_for 120 "apiserver /readyz" apiserver_ready
}
logs_have() { K logs "$1" | grep -q "$2"; } # logs_have POD REGEX
ask_pod() { # ask_pod UNITS: a pod asking UNITS of wsched.io/gpu-memory
	printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: ask-%s}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {name: main, image: "localhost/busybox:local", command: [sleep, "3600"], resources: {limits: {wsched.io/gpu-memory: "%s"}}}\n' "$1" "$1" |
		K apply -f - >/dev/null
}

cluster_up() {
	local p=${WORK}/pki c0=${EPOCHREALTIME}
	local common=(--kubeconfig="${p}/admin.kubeconfig" --authentication-kubeconfig="${p}/admin.kubeconfig"
		--authorization-kubeconfig="${p}/admin.kubeconfig" --bind-address=127.0.0.1 --leader-elect=false)
	timed "cluster: pki" pki
	timed "cluster: etcd + apiserver ready" start_control_plane
	start controller-manager "${K8S_BIN}/kube-controller-manager" "${common[@]}" --service-account-private-key-file="${p}/sa.key" \
		--root-ca-file="${p}/ca.crt" --use-service-account-credentials=false
	start scheduler "${K8S_BIN}/kube-scheduler" "${common[@]}"
	kubelet_config "${WORK}/kubelet-cluster.yaml"
	start_kubelet_cluster
	timed "cluster: node Ready" wait_for 120 "node ${NODE} Ready" node_ready
	TIMES["cluster: up, pki to node Ready"]=$(secs "${c0}")
	log "cluster up (pki → node Ready): ${TIMES["cluster: up, pki to node Ready"]}s"
}

# node_gpu: what the manifests expect of a GPU node (its label, the nvidia RuntimeClass)
node_gpu() {
	K label node "${NODE}" nvidia.com/gpu.present=true --overwrite >/dev/null
	printf 'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia}\nhandler: nvidia\n' | K apply -f - >/dev/null
}
# patched OUT [FILE...]: packaging/kubernetes/FILE... as this node runs them (e2e/patch)
patched() {
	local out=$1
	shift
	go -C "${REPO}/packaging/kubernetes" run ./e2e/patch . "${REPO}/testdata/sim-8x4090.toml" "${WORK}/state/ds" "$@" >"${out}"
}
sensevoice_gone() { [[ -z $(K get pods -l app.kubernetes.io/name=sensevoice -o name) ]]; }

# cluster [keep]: with keep, the node agent stays (the DRA scenario takes the node from it)
cluster() {
	log "== single-node cluster"
	local pod env n
	cluster_up
	node_gpu
	patched "${WORK}/wsched-e2e.yaml"
	K apply -f "${WORK}/wsched-e2e.yaml" | sed 's/^/    /'
	timed "cluster: DaemonSet ready, node advertises 86" ds_ready
	timed "cluster: sensevoice 2/2 running" K rollout status deploy/sensevoice --timeout=120s
	for pod in $(K get pods -l app.kubernetes.io/name=sensevoice -o name); do
		wait_for 30 "${pod} printed its env" logs_have "${pod}" '^WSCHED_'
		env=$(K logs "${pod}")
		echo "${env}" | grep -E '^(WSCHED_LEASE_ID|WSCHED_MEMORY_BYTES|CUDA_VISIBLE_DEVICES)=' | sed "s#^#    ${pod#pod/}: #"
		echo "${env}" | grep -q '^WSCHED_MEMORY_BYTES=4294967296$' || fail "${pod}: no 4 GiB lease env"
	done
	ds_leases | sed 's/^/    /'

	for n in 20 100; do ask_pod "${n}"; done
	wait_for 60 "ask-20 rejected at admission" ask_rejected ask-20
	wait_for 60 "ask-100 unschedulable" ask_unschedulable ask-100
	log "20 units (fit the node, no GPU): $(K get pod ask-20 -o jsonpath='{.status.reason}: {.status.message}' | cut -c1-220)"
	log "100 units (more than the node): $(K get pod ask-100 -o jsonpath='{.status.conditions[0].message}')"
	K delete pod ask-20 ask-100 --wait=false >/dev/null

	K scale deploy/sensevoice --replicas=0 >/dev/null
	timed "cluster: scaled to 0, leases released" wait_for 120 "leases released" ds_no_leases
	timed "cluster: kubelet restart, 86 again" restart_kubelet_cluster
	one_registration
	K scale deploy/sensevoice --replicas=1 >/dev/null
	timed "cluster: allocation after kubelet restart" K rollout status deploy/sensevoice --timeout=120s
	pod=$(K get pods -l app.kubernetes.io/name=sensevoice -o name)
	wait_for 30 "${pod} printed its env" logs_have "${pod}" '^WSCHED_'
	logs_have "${pod}" '^WSCHED_LEASE_ID=' || fail "no lease env after the kubelet restart"
	log "RSS (MiB): $(for n in etcd apiserver controller-manager scheduler kubelet containerd; do printf '%s=%s ' "${n}" $(($(ps -o rss= -p "$(cat "${WORK}/pids/${n}")") / 1024)); done)"

	if [[ ${1:-} = keep ]]; then
		K delete deploy/sensevoice --wait=false >/dev/null
		timed "cluster: sensevoice gone" wait_for 120 "sensevoice pods gone" sensevoice_gone
	else
		K delete -f "${WORK}/wsched-e2e.yaml" --wait=false >/dev/null
		timed "cluster: pods gone" K wait --for=delete pod --all -A --timeout=120s
	fi
	log "cluster: PASS"
}
