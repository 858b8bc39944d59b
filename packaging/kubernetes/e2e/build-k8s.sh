#!/bin/bash
# build-k8s.sh — build the Kubernetes binaries the e2e needs through the Go
# module proxy, into a cache directory keyed by version.
#
# No release tarball, no git clone: a scratch module requires
# k8s.io/kubernetes vX.Y.Z and replaces every staging module (./staging/...
# in kubernetes' own go.mod) by its published v0.Y.Z. Cold: 8 min on 2 quiet
# cores, ~20 min on busy ones; ~460 MB. Idempotent: binaries already present
# are kept, and they land under a temporary name first (no half-written file
# is ever taken for a cached one).
#
# Usage: build-k8s.sh VERSION DEST     e.g. build-k8s.sh 1.37.2 /var/cache/wsched-k8s/v1.37.2
set -euo pipefail

VERSION=${1:?usage: build-k8s.sh VERSION DEST}
DEST=${2:?usage: build-k8s.sh VERSION DEST}
CMDS="kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl"

missing=""
for c in $CMDS; do [ -x "$DEST/$c" ] || missing="$missing $c"; done
[ -n "$missing" ] || exit 0

mkdir -p "$DEST"
b="$DEST/.build"
mkdir -p "$b"
minor=${VERSION#*.}
minor=${minor%%.*}
proxy=$(go env GOPROXY | tr ',|' '\n' | grep -m1 '^http')
curl -fsS "$proxy/k8s.io/kubernetes/@v/v$VERSION.mod" -o "$b/kubernetes.mod"
{
	echo "module k8sbuild"
	echo
	echo "go $(awk '/^go /{print $2}' "$b/kubernetes.mod")"
	echo
	echo "require k8s.io/kubernetes v$VERSION"
	echo
	echo "replace ("
	awk -v v="v0.${VERSION#1.}" '/=> .\/staging/{print "\t"$1" => "$1" "v}' "$b/kubernetes.mod"
	echo ")"
} >"$b/go.mod"
{
	printf '//go:build tools\n\npackage k8sbuild\n\nimport (\n'
	for c in $CMDS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
	printf ')\n'
} >"$b/tools.go"
(cd "$b" && go mod tidy)

ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld="$ld -X $p.gitVersion=v$VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
for c in $missing; do
	s=$(date +%s)
	(cd "$b" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ld" -o "$DEST/.$c.tmp" "k8s.io/kubernetes/cmd/$c")
	mv "$DEST/.$c.tmp" "$DEST/$c"
	echo "build-k8s: $c v$VERSION in $(($(date +%s) - s))s"
done
rm -rf "$b"
