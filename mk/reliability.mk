# mk/reliability.mk — the exhaustion scenarios of issue 14 (part of `make test`).
#
#   make reliability   runs TestReliability (daemon/reliability_test.go) against real daemons on Unix
#                      sockets and loopback TCP, each scenario with its protection off ("before") and with
#                      the shipped defaults ("after"), and prints the table: scenario, figure, before,
#                      after, pass; then the holder scenarios (cmd/wsched: `eval "$(wsched lease …)"`,
#                      `wsched run` killed -9) and the outage scenarios (daemon down past a lease's TTL,
#                      back without the lease, restarted under a queued `run --wait`, stopped with SIGSTOP), whose fixes cannot
#                      be turned off (before: the issue's finding). Bounded by -timeout 5m each (about 30 s alone). The per-uid scenarios run
#                      their clients as uid nobody, which needs root; without root the test skips and says so.
.PHONY: reliability
test: reliability

reliability:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	echo "WSCHED_RELIABILITY=$$tmp/table $(GO) test -count=1 -timeout 5m -run '^TestReliability$$' ./daemon/" && \
	TMPDIR=$$tmp WSCHED_RELIABILITY=$$tmp/table $(GO) test -count=1 -timeout 5m -run '^TestReliability$$' ./daemon/ && \
	TMPDIR=$$tmp WSCHED_RELIABILITY=$$tmp/table $(GO) test -count=1 -timeout 5m -run '^TestReliabilityHolders$$' ./cmd/wsched/ && \
	if [ -f "$$tmp/table" ]; then cat "$$tmp/table" "$$tmp/table.holders"; else echo "reliability: skipped (the per-uid scenarios need root)"; fi
