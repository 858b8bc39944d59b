#!/bin/sh
# whisper-package-env.sh PREFIX — the cgo environment for building the *packaged* whisper backend from
# the whisper.cpp prefix `make deps` made (PREFIX/whisper.env, PREFIX/MANIFEST), printed as shell
# assignments for mk/packaging.mk to eval:
#   route system   Debian's libwhisper1/libggml0 from the host's release: the flags as they are;
#                  WHISPER_PACKAGE_LIBS is empty (the package depends on those libraries)
#   route source   a build in PREFIX/lib; route bundle: Debian packages of a newer suite unpacked with
#                  their own libc and loader. The libraries are shipped in /usr/lib/wsched/lib/whisper:
#                  the rpath, the dynamic loader (bundle) and ggml's backend directory are rewritten to
#                  point there, the linker still finds them in PREFIX (-rpath-link), and
#                  WHISPER_PACKAGE_LIBS names the directory mkdeb copies them from.
set -eu
prefix=${1:?usage: whisper-package-env.sh PREFIX}
dst=/usr/lib/wsched/lib/whisper
if [ ! -f "$prefix/whisper.env" ] || [ ! -f "$prefix/MANIFEST" ]; then
	echo "whisper-package-env: $prefix has no whisper.env/MANIFEST: run make deps" >&2
	exit 1
fi
# shellcheck disable=SC1091
. "$prefix/whisper.env"
route=$(sed -n 's/^route=//p' "$prefix/MANIFEST")
case $route in
system)
	libs=''
	;;
source | bundle)
	# The directory the development build's rpath names: PREFIX/lib (source) or the bundle's libdir.
	libs=$(printf '%s\n' "$CGO_LDFLAGS" | tr ' ' '\n' | sed -n 's/^-Wl,-rpath,//p' | head -n1)
	if [ -z "$libs" ] || [ ! -d "$libs" ]; then
		echo "whisper-package-env: no rpath directory in $prefix/whisper.env" >&2
		exit 1
	fi
	CGO_CFLAGS=$(printf '%s\n' "$CGO_CFLAGS" | sed "s|BACKEND_DIR=\"$libs/|BACKEND_DIR=\"$dst/|g")
	CGO_LDFLAGS=$(printf '%s\n' "$CGO_LDFLAGS" | tr ' ' '\n' | sed -e "s|^-Wl,-rpath,$libs\$|-Wl,-rpath,$dst -Wl,-rpath-link,$libs|" \
		-e "s|--dynamic-linker=$libs/|--dynamic-linker=$dst/|" | tr '\n' ' ' | sed 's/ $//')
	;;
*)
	echo "whisper-package-env: unknown route '$route' in $prefix/MANIFEST" >&2
	exit 1
	;;
esac
printf "export CGO_ENABLED=1 CGO_CFLAGS='%s' CGO_LDFLAGS='%s'\n" "$CGO_CFLAGS" "$CGO_LDFLAGS"
printf "WHISPER_PACKAGE_LIBS='%s'\n" "$libs"
