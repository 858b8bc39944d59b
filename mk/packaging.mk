# mk/packaging.mk — Debian packages and their tests (issues 7, 22).
#
#   make deb             dist/wsched_VERSION_ARCH.deb and the three backends,
#                        dist/wsched-backend-{whisper,sherpa,exec}_VERSION_ARCH.deb, each installable on
#                        Debian 12 by itself (libraries Debian 12 lacks are shipped in
#                        /usr/lib/wsched/lib/NAME; see docs/packaging.md)
#   make packaging-test  unit tests of packaging/, the .deb installed into throwaway Debian roots,
#                        systemd-analyze verify of the installed units, lintian (part of `make test`)
#   make systemd-test    the packages under a real systemd (mk/systemd.mk)
#
# packaging/ is a Go module of its own: nfpm's dependency tree (go-git, crypto, …) stays out of the
# daemon's go.mod, and `go test ./...` at the top does not build it.

PACKAGING_DIR    := packaging
DIST             ?= dist
DEB_BUILD        := $(DIST)/build
# Throwaway roots made by packaging/deps/packaging-deps.sh (debootstrap; see there).
PACKAGING_CACHE  ?= /var/cache/wsched-packaging
PACKAGING_SUITE  ?= bookworm
export PACKAGING_CACHE PACKAGING_SUITE

# Version: `git describe` of the last vX.Y.Z tag; without tags v0.0.0-COMMITS-gHASH (same shape, so
# the Debian versions still grow with every commit); without git v0.0.0. mkdeb turns it into
# a Debian version (packaging/version.go).
DEB_DESCRIBE ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || \
	{ git rev-parse --short=7 HEAD >/dev/null 2>&1 && \
	  echo "v0.0.0-$$(git rev-list --count HEAD)-g$$(git rev-parse --short=7 HEAD)$$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"; } || \
	echo v0.0.0)
# Commit time: file dates and changelog date in the packages, so that rebuilds are identical.
DEB_DATE       ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
# Maintainer: the builder's identity, as debchange takes it (DEBFULLNAME/DEBEMAIL, else git config).
DEB_MAINTAINER ?= $(shell n="$${DEBFULLNAME:-$$(git config user.name)}"; e="$${DEBEMAIL:-$$(git config user.email)}"; \
	[ -n "$$n" ] && [ -n "$$e" ] && echo "$$n <$$e>")
DEB_ARCH       ?= $(shell $(GO) env GOARCH)
# The packaged backends are built here, not taken from bin/: their library paths are the installed
# ones (/usr/lib/wsched/lib/whisper for the whisper.cpp libraries, and for the bundle route its
# loader; see packaging/whisper-package-env.sh), and they are stripped and versioned like the daemon.
DEB_GOFLAGS     = -trimpath -buildmode=pie -ldflags "-s -w -X main.version=$(DEB_DESCRIBE)"

.PHONY: deb packaging-deps packaging-test packaging-unit packaging-install-test packaging-lint

deps: packaging-deps
test: packaging-test

packaging-deps:
	bash $(PACKAGING_DIR)/deps/packaging-deps.sh

# -buildmode=pie and stripping keep lintian's hardening and debug-symbol checks quiet; mkdeb strips
# every binary again, as dh_strip would.
deb: whisper-deps
	@mkdir -p $(DEB_BUILD)
	rm -f $(DIST)/*.deb
	$(GO) build $(DEB_GOFLAGS) -o $(DEB_BUILD)/wsched ./cmd/wsched
	$(GO) build $(DEB_GOFLAGS) -o $(DEB_BUILD)/wsched-backend-exec ./cmd/wsched-backend-exec
	$(CC) $(PRELOAD_CFLAGS) $(PRELOAD_DEB_FLAGS) -o $(DEB_BUILD)/libwsched_cuda_cap.so $(PRELOAD_SRC) -ldl -lpthread
	$(GO) mod download $(SHERPA_MODULE)
	$(GO) build $(DEB_GOFLAGS) -o $(DEB_BUILD)/wsched-backend-sherpa ./cmd/wsched-backend-sherpa
	$(GO) -C $(PACKAGING_DIR) build -trimpath -o $(CURDIR)/$(DEB_BUILD)/mkdeb ./cmd/mkdeb
	eval "$$(sh $(PACKAGING_DIR)/whisper-package-env.sh $(WHISPER_PREFIX))" && \
	$(GO) build $(DEB_GOFLAGS) -tags $(WHISPER_GO_TAGS) -o $(DEB_BUILD)/wsched-backend-whisper ./cmd/wsched-backend-whisper && \
	$(DEB_BUILD)/mkdeb -dir $(PACKAGING_DIR) -out $(DIST) -version '$(DEB_DESCRIBE)' -date '$(DEB_DATE)' \
		-arch $(DEB_ARCH) -maintainer '$(DEB_MAINTAINER)' -wsched $(DEB_BUILD)/wsched -config wsched.toml \
		-preload $(DEB_BUILD)/libwsched_cuda_cap.so \
		-backend-whisper $(DEB_BUILD)/wsched-backend-whisper -whisper-libs "$$WHISPER_PACKAGE_LIBS" \
		-backend-sherpa $(DEB_BUILD)/wsched-backend-sherpa -sherpa-libs $(SHERPA_LIB_DIR) \
		-backend-exec $(DEB_BUILD)/wsched-backend-exec

packaging-test: packaging-unit packaging-install-test packaging-lint

# vet, staticcheck (when the top-level Makefile provides it) and the race-enabled tests of the
# packaging module; the dpkg listing test reads the packages `make deb` wrote.
packaging-unit: deb $(STATICCHECK)
	$(GO) -C $(PACKAGING_DIR) vet ./...
	$(if $(STATICCHECK),cd $(PACKAGING_DIR) && $(STATICCHECK) ./...)
	WSCHED_DEB_DIR=$(CURDIR)/$(DIST) $(GO) -C $(PACKAGING_DIR) test -race -count=1 ./...

# dpkg --root into fresh copies of the cached roots (one without systemd, one with systemd installed
# but not running), then systemd-analyze verify --root on the installed units.
packaging-install-test: deb
	sh $(PACKAGING_DIR)/test/install-test.sh $(DIST)

# No errors allowed; warnings are printed (known ones: see docs/packaging.md).
packaging-lint: deb
	lintian --fail-on error $(DIST)/*.deb
