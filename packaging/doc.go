// Package packaging builds the Debian packages of wsched with nfpm: one package for the daemon and
// one per backend, from the systemd units, sysusers.d/tmpfiles.d snippets and maintainer scripts kept
// next to this file. cmd/mkdeb is its command-line front end; `make deb` runs it.
package packaging
