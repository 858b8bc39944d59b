# mk/systemd.mk — the Debian packages under a real systemd (issue 22).
#
#   make systemd-test   boots Debian 12 with systemd-nspawn (systemd as PID 1), installs the freshly
#                       built dist/*.deb with the README's install lines and checks socket activation,
#                       socket discovery, a transcription through each packaged backend, the sandbox
#                       and its `systemd-analyze security` exposure, the watchdog, a lease across a
#                       restart, stop and purge, the enforcement tier the daemon picks and why, and
#                       `wsched run` in a systemd scope (packaging/test/systemd-test.sh; part of `make test`).
#
# Needs root, systemd-container and debootstrap (make deps). The Debian root is made once with
# debootstrap and cached as a tarball in $(PACKAGING_CACHE) (outside the clone); each run unpacks a
# fresh copy and deletes it. ≈ 1 min with the root cached, ≈ 2.5–3 min cold (see docs/packaging.md).
.PHONY: systemd-test

test: systemd-test

systemd-test: deb
	DIST=$(CURDIR)/$(DIST) bash $(PACKAGING_DIR)/test/systemd-test.sh
