#!/bin/bash
# build-containerd.sh — build containerd 2.x (containerd, the runc v2 shim and
# ctr) through the Go module proxy, into a cache directory keyed by version.
#
# Why: kubelet 1.37 hands DRA's CDI devices to the runtime only in the CRI
# field CDIDevices, which Debian 12's containerd 1.6.20 does not know (its CRI
# drops it, and it has no CDI support anyway); containerd >= 1.7 applies CDI
# specs natively (enable_cdi), and kubelet 1.38 needs containerd 2 for its
# RuntimeConfig call anyway. Debian's runc 1.1.5 stays the OCI runtime.
#
# No release tarball, no git clone: `go install module/cmd/X@vVERSION` (the
# containerd module has no replace directives). CGO off and no_btrfs: the
# e2e uses overlayfs, and a static shim is what containerd releases ship.
# Idempotent: binaries already present are kept; they land under a temporary
# name first (no half-written file is ever taken for a cached one).
#
# Usage: build-containerd.sh VERSION DEST   e.g. build-containerd.sh 2.4.2 /var/cache/wsched-containerd/v2.4.2
set -euo pipefail

VERSION=${1:?usage: build-containerd.sh VERSION DEST}
DEST=${2:?usage: build-containerd.sh VERSION DEST}
CMDS="containerd containerd-shim-runc-v2 ctr"
MOD=github.com/containerd/containerd/v2

missing=""
for c in ${CMDS}; do [[ -x ${DEST}/${c} ]] || missing="${missing} ${c}"; done
[[ -n ${missing} ]] || exit 0

mkdir -p "${DEST}"
b="${DEST}/.build"
rm -rf "${b}"
mkdir -p "${b}"
ld="-s -w -X ${MOD}/version.Version=v${VERSION} -X ${MOD}/version.Revision=proxy -X ${MOD}/version.Package=${MOD}"
for c in ${missing}; do
	s=$(date +%s)
	GOBIN="${b}" CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
		go install -trimpath -tags 'no_btrfs urfave_cli_no_docs' -ldflags "${ld}" "${MOD}/cmd/${c}@v${VERSION}"
	mv "${b}/${c}" "${DEST}/.${c}.tmp"
	mv "${DEST}/.${c}.tmp" "${DEST}/${c}"
	echo "build-containerd: ${c} v${VERSION} in $(($(date +%s) - s))s"
done
rm -rf "${b}"
