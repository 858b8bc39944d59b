# mk/packaging.mk — Debian packages and their tests (issue 7).
#
#   make deb             dist/wsched_VERSION_ARCH.deb (+ dist/wsched-backend-whisper_… when
#                        bin/wsched-backend-whisper is built)
#   make packaging-test  unit tests of packaging/, the .deb installed into throwaway Debian roots,
#                        systemd-analyze verify of the installed units, lintian (part of `make test`)
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
WHISPER_BACKEND ?= $(BIN)/wsched-backend-whisper
# The backend package depends on Debian's libwhisper1, so it is built only where make deps took
# whisper.cpp from the host's own packages (route "system" in $(WHISPER_PREFIX)/MANIFEST). A backend
# built against the bundle or a source build in .cache/whisper is for this machine only.
WHISPER_ROUTE    = $(shell sed -n 's/^route=//p' $(WHISPER_PREFIX)/MANIFEST 2>/dev/null)

.PHONY: deb packaging-deps packaging-test packaging-unit packaging-install-test packaging-lint

deps: packaging-deps
test: packaging-test

packaging-deps:
	bash $(PACKAGING_DIR)/deps/packaging-deps.sh

# -buildmode=pie and stripping keep lintian's hardening and debug-symbol checks quiet; mkdeb strips
# every binary again (also the backend built elsewhere), as dh_strip would.
deb:
	@mkdir -p $(DEB_BUILD)
	rm -f $(DIST)/*.deb
	$(GO) build -trimpath -buildmode=pie -ldflags "-s -w -X main.version=$(DEB_DESCRIBE)" \
		-o $(DEB_BUILD)/wsched ./cmd/wsched
	$(GO) -C $(PACKAGING_DIR) build -trimpath -o $(CURDIR)/$(DEB_BUILD)/mkdeb ./cmd/mkdeb
	@if [ ! -x "$(WHISPER_BACKEND)" ]; then \
		echo "deb: $(WHISPER_BACKEND) is not built: building the wsched package only"; \
	elif [ "$(WHISPER_ROUTE)" != system ]; then \
		echo "deb: whisper.cpp came from route '$(WHISPER_ROUTE)', not the host's packages (libwhisper1):" \
			"building the wsched package only (see docs/deps.md)"; fi
	$(DEB_BUILD)/mkdeb -dir $(PACKAGING_DIR) -out $(DIST) -version '$(DEB_DESCRIBE)' -date '$(DEB_DATE)' \
		-arch $(DEB_ARCH) -maintainer '$(DEB_MAINTAINER)' -wsched $(DEB_BUILD)/wsched -config wsched.toml \
		$(if $(and $(wildcard $(WHISPER_BACKEND)),$(filter system,$(WHISPER_ROUTE))),-backend-whisper $(WHISPER_BACKEND))

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
