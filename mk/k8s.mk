# mk/k8s.mk — Kubernetes manifests (issue 17).
#
#   make k8s-manifests-test   decode packaging/kubernetes/*.yaml strictly into the typed
#                             k8s.io/api objects and check the fields the node agent needs
#                             (part of `make test`; no cluster needed)
#
# packaging/kubernetes/ is a Go module of its own, so k8s.io/api stays out of the daemon's
# go.mod; the device plugin's own tests (fake kubelet) run with `go test ./...`.

.PHONY: k8s-manifests-test
test: k8s-manifests-test

k8s-manifests-test:
	cd packaging/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...
