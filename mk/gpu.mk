# mk/gpu.mk — the real-GPU check (packaging/gpu/check.sh), for a machine with an NVIDIA GPU.
#
#   make gpu-kit WHISPER_SRC_TGZ=whisper.cpp-vX.tar.gz
#       gathers in $(GPU_KIT) what check.sh needs: wsched and the whisper backend (built against
#       $(WHISPER_PREFIX), which must be the same whisper.cpp version as the tarball: check.sh builds
#       that tarball with CUDA and runs the backend on it through LD_LIBRARY_PATH), the weightless
#       test models, jfk.wav, the report script, the `preload` tier's libwsched_cuda_cap.so beside
#       wsched (where the daemon finds it) and the contention run (issue 27, contention.sh: see
#       docs/enforcement.md). Then, on the GPU machine:
#       bash packaging/gpu/check.sh $(GPU_KIT) OUT  →  OUT/report.md
.PHONY: gpu-kit
GPU_KIT ?= .gpu

gpu-kit: preload
	@test -n "$(WHISPER_SRC_TGZ)" || { echo "gpu-kit: set WHISPER_SRC_TGZ to a whisper.cpp source tarball"; exit 1; }
	mkdir -p $(GPU_KIT)/bin $(GPU_KIT)/models
	cp $(WHISPER_SRC_TGZ) $(GPU_KIT)/whisper-src.tgz
	$(GO) build -trimpath -ldflags "-s -w" -o $(GPU_KIT)/bin/wsched ./cmd/wsched
	$(WHISPER_GO_ENV) $(GO) build -tags $(WHISPER_GO_TAGS) -trimpath -ldflags "-s -w" -o $(GPU_KIT)/bin/ ./cmd/wsched-backend-whisper
	cp ../shared/models/whisper-empty/for-tests-ggml-tiny.bin ../shared/models/whisper-empty/for-tests-ggml-base.bin \
	   ../shared/models/whisper-empty/for-tests-ggml-small.bin ../shared/models/whisper-empty/for-tests-ggml-medium.bin \
	   ../shared/models/whisper-empty/for-tests-ggml-large.bin $(GPU_KIT)/models/
	cp ../shared/audio/jfk.wav packaging/gpu/report.py $(GPU_KIT)/
	cp $(PRELOAD_LIB) $(GPU_KIT)/bin/
	cp packaging/gpu/hog.c packaging/gpu/contention.sh packaging/gpu/daemon-config.sh $(GPU_KIT)/
