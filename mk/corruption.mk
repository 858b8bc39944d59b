# mk/corruption.mk — the corruption campaign of issue 25.
#
#   make corruption N=200   runs TestCorruptionCampaign (daemon/corruption_test.go): N trials, each with real
#                           daemon processes on a temporary state dir and real holder processes keeping leases;
#                           the journal, the database or the epoch is damaged at random (a flipped bit, zeroed
#                           bytes, a cut, a deletion), after a kill -9 or a stop, and the daemon restarted. It
#                           prints a table of outcomes: refused with a clear error, restored every live lease,
#                           SILENT LOSS or DOUBLE GRANT (the last two, and an unclear refusal, fail the run);
#                           refused states are repaired (`wsched state repair`) and started again. About 0.5 s
#                           per trial. SEED=… repeats a run.
#   `make test` runs a short campaign (N=$(CORRUPTION_TEST_N)).
N ?= 200
SEED ?=
CORRUPTION_TEST_N ?= 20

.PHONY: corruption corruption-short
test: corruption-short

corruption:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	TMPDIR=$$tmp WSCHED_CORRUPTION=$(N) WSCHED_CORRUPTION_SEED=$(SEED) WSCHED_CORRUPTION_TABLE=$$tmp/table \
		$(GO) test -count=1 -timeout 30m -run '^TestCorruptionCampaign$$' ./daemon/ >$$tmp/log 2>&1; rc=$$?; \
	if [ -f "$$tmp/table" ]; then cat "$$tmp/table"; fi; \
	if [ $$rc -ne 0 ]; then grep -E -- '--- FAIL|corruption_test.go' $$tmp/log | grep -v ' restored all\| refused (clear' | tail -40; fi; \
	exit $$rc

corruption-short:
	@$(MAKE) --no-print-directory corruption N=$(CORRUPTION_TEST_N)
