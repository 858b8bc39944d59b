# mk/whisper-testdata.mk — regenerate estimator/testdata/whispercpp-1.9.5 from whisper.cpp itself.
#
#   make whisper-testdata   (after make deps) runs bin/whisper-probe for every for-tests model and variant:
#                           raw whisper.cpp logs to <model>-<variant>.log, parsed figures to buffers.json.
# Takes about an hour on 2 cores: the zero-weight models still run the full encoder.
.PHONY: whisper-probe whisper-testdata

WHISPER_TESTDATA_DIR    ?= estimator/testdata/whispercpp-1.9.5
WHISPER_TEST_MODELS_DIR ?= ../shared/models/whisper-empty
WHISPER_TEST_AUDIO      ?= ../shared/audio/jfk.wav
WHISPER_PROBE_VARIANTS  ?= greedy-fa-off greedy-fa-on greedy-nofallback-fa-off beam5-fa-off beam5-fa-on

whisper-probe:
	$(WHISPER_GO_ENV) $(GO) build -tags $(WHISPER_GO_TAGS) -o $(BIN)/whisper-probe ./plugins/whisper/internal/probe

whisper-testdata: whisper-probe
	@set -e; mkdir -p $(WHISPER_TESTDATA_DIR); tmp=$$(mktemp -d); \
	for m in $(WHISPER_TEST_MODELS_DIR)/for-tests-ggml-*.bin; do \
		name=$$(basename "$$m" .bin); name=$${name#for-tests-ggml-}; \
		for v in $(WHISPER_PROBE_VARIANTS); do \
			echo "whisper-testdata: $$name $$v"; \
			$(BIN)/whisper-probe -model "$$m" -audio $(WHISPER_TEST_AUDIO) -variant $$v \
				-json "$$tmp/$$name-$$v.json" 2>"$(WHISPER_TESTDATA_DIR)/$$name-$$v.log" >/dev/null; \
		done; \
	done; \
	$(BIN)/whisper-probe -merge "$$tmp" -json $(WHISPER_TESTDATA_DIR)/buffers.json; \
	rm -rf "$$tmp"; echo "whisper-testdata: wrote $(WHISPER_TESTDATA_DIR)"
