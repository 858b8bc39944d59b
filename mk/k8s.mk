# mk/k8s.mk — Kubernetes manifests (issue 17) and the end-to-end test against a real kubelet (issue 28).
#
#   make k8s-manifests-test   decode packaging/kubernetes/*.yaml strictly into the typed
#                             k8s.io/api objects and check the fields the node agent needs;
#                             dra/driver.yaml's flags and host paths against `wsched k8s
#                             dra-driver --help` (builds wsched, or WSCHED_BIN=…), its RBAC
#                             against dra/api-calls.txt (part of `make test`; no cluster needed)
#   make k8s-e2e              the device plugin against a real kubelet v$(K8S_VERSION): standalone
#                             (static pods) and a single-node cluster with the project's manifests,
#                             then the DRA driver from dra/driver.yaml in that cluster
#                             (packaging/kubernetes/e2e/kubelet-e2e.sh; root, Debian 12; part of
#                             `make test`). The Kubernetes binaries are built once through the Go
#                             module proxy into $(K8S_CACHE)/v$(K8S_VERSION) (cold: 8–20 min), and
#                             so is containerd 2.x (CDI for the DRA driver), into
#                             /var/cache/wsched-containerd/v<version> (build-containerd.sh; cold ≈ 5 min).
#   make k8s-e2e-teardown     undo what a killed k8s-e2e left on the host
#
# packaging/kubernetes/ is a Go module of its own, so k8s.io/api stays out of the daemon's
# go.mod; the device plugin's own tests (fake kubelet) run with `go test ./...`.

# The kubelet the device plugin is built against: k8s.io/kubelet v0.X.Y in go.mod ⇒ v1.X.Y.
K8S_VERSION ?= $(shell sed -n 's/^[[:space:]]*k8s.io\/kubelet v0\.\([0-9.]*\).*/1.\1/p' go.mod | head -1)
K8S_CACHE   ?= /var/cache/wsched-k8s
K8S_E2E     := packaging/kubernetes/e2e/kubelet-e2e.sh
export K8S_VERSION K8S_CACHE

FUZZ_TARGETS += ./k8s/dra:FuzzParseQuantity ./k8s/dra:FuzzDecodeCheckpoint

.PHONY: k8s-manifests-test k8s-e2e k8s-e2e-teardown
test: k8s-manifests-test k8s-e2e

k8s-manifests-test:
	cd packaging/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...

# Needs root (containerd, the kubelet, mounts, iptables): elsewhere it says so and is skipped.
k8s-e2e:
	@if [ "$$(id -u)" != 0 ]; then echo "k8s-e2e: SKIPPED: needs root (a real kubelet and containerd)"; exit 0; fi; \
	bash $(K8S_E2E) all

k8s-e2e-teardown:
	bash $(K8S_E2E) teardown
