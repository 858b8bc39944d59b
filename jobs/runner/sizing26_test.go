package runner

import (
	"context"
	"log/slog"
	"testing"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/internal/testshared"
	"github.com/wsched/wsched/internal/units"
	"github.com/wsched/wsched/jobs"
	"github.com/wsched/wsched/models"
	"github.com/wsched/wsched/placement"
	"github.com/wsched/wsched/plugins"
	"github.com/wsched/wsched/plugins/descriptor"
	"github.com/wsched/wsched/plugins/whisper/describe"
)

type oneGPU struct{}

func (oneGPU) Accounts() ([]placement.Account, string) {
	return []placement.Account{{Index: 0, Name: "NVIDIA H100 80GB HBM3", AvailableBytes: 80 * units.GiB}}, "580.65.06"
}

// tinyModel is the weightless whisper.cpp tiny as a configured entry.
func tinyModel(t *testing.T, e config.Model) models.Model {
	t.Helper()
	e.Name, e.Backend, e.Path = "tiny", describe.Name, testshared.File(t, "models/whisper-empty/for-tests-ggml-tiny.bin")
	reg, err := models.Load(context.Background(), config.Models{Entries: []config.Model{e}}, descriptor.NewSet(describe.Descriptor()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.Lookup("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSizeGivesSharedAndStreamParts (issue 26): a job's lease is the
// estimate for one stream (shared part + one stream, with the margin) and
// what it adds to an instance it joins is the per-stream part with the same
// margin, both scaled by the job's OOM factor; with configured memory the
// first stream is that memory and a stream still the estimator's part; a
// model without a profile costs its whole memory per stream.
func TestSizeGivesSharedAndStreamParts(t *testing.T) {
	r := &Runner{sizer: NewSizer(estimator.New(estimator.Config{}, nil), oneGPU{})}
	m := tinyModel(t, config.Model{MaxStreams: 4})
	if m.Streams() != 4 {
		t.Fatalf("streams %d, want 4", m.Streams())
	}
	req, err := m.EstimateRequest()
	if err != nil {
		t.Fatal(err)
	}
	est, err := r.sizer.EstimateAnyGPU(req)
	if err != nil {
		t.Fatal(err)
	}
	z, err := r.size(m, jobs.Job{})
	if err != nil {
		t.Fatal(err)
	}
	per := est.Streams.PerStreamBytes
	if z.Bytes != est.RecommendedBytes || z.StreamBytes < per || z.StreamBytes >= z.Bytes || z.StreamBytes > per*2 {
		t.Fatalf("size %d + %d per stream; estimate %d, per-stream part %d", z.Bytes, z.StreamBytes, est.RecommendedBytes, per)
	}
	four := req
	four.Concurrency = 4
	est4, _ := r.sizer.EstimateAnyGPU(four)
	if got, want := z.Bytes+3*z.StreamBytes, est4.RecommendedBytes; got < want-3 || got > want+3 { // rounding per stream
		t.Errorf("one + three streams %d, the estimate for four %d", got, want)
	}
	raised, _ := r.size(m, jobs.Job{OOMFactor: 1.5})
	if raised.StreamBytes < z.StreamBytes*3/2-1 || raised.Bytes < z.Bytes*3/2-1 { // rounding
		t.Errorf("after an OOM: %+v, want both parts × 1.5 of %+v", raised, z)
	}

	configured := tinyModel(t, config.Model{Memory: units.Bytes(2 * units.GiB)})
	if zc, _ := r.size(configured, jobs.Job{}); zc.Bytes != 2*units.GiB || zc.StreamBytes != z.StreamBytes {
		t.Errorf("configured memory: %+v, want 2 GiB and the estimator's %d per stream", zc, z.StreamBytes)
	}
	unknown := models.Model{Name: "x", Backend: "x", MemoryBytes: units.GiB, Descriptor: descriptor.Descriptor{Name: "x", Plugin: "x"}}
	if zu, _ := r.size(unknown, jobs.Job{}); zu.Bytes != units.GiB || zu.StreamBytes != units.GiB {
		t.Errorf("no profile: %+v, want a stream to cost the whole 1 GiB", zu)
	}
	declared := unknown
	declared.StreamMemoryBytes = 256 * units.MiB // [[models.model]] stream_memory
	if zd, _ := r.size(declared, jobs.Job{}); zd.Bytes != units.GiB || zd.StreamBytes != 256*units.MiB {
		t.Errorf("stream_memory 256 MiB, no profile: %+v, want 1 GiB and 256 MiB per stream", zd)
	}
	if zd, _ := r.size(declared, jobs.Job{OOMFactor: 2}); zd.StreamBytes != 512*units.MiB {
		t.Errorf("stream_memory after an OOM: %+v, want 512 MiB per stream", zd)
	}
	declaredTiny := tinyModel(t, config.Model{StreamMemory: units.Bytes(64 * units.MiB)})
	if zt, _ := r.size(declaredTiny, jobs.Job{}); zt.Bytes != z.Bytes || zt.StreamBytes != 64*units.MiB {
		t.Errorf("stream_memory over the estimate: %+v, want %d and 64 MiB per stream", zt, z.Bytes)
	}
}

type peaks map[string]int64

func (p peaks) RecordPeak(k estimator.Key, b int64) error { p[k.String()] = b; return nil }

// TestStreamPeakLearnedApart (issue 26): what a call reports its own stream
// allocated is recorded under the key's stream part, for the GPU model the
// lease is on; a CPU instance or no report records nothing.
func TestStreamPeakLearnedApart(t *testing.T) {
	got := peaks{}
	r := &Runner{learn: got, log: slog.New(slog.DiscardHandler)}
	key := estimator.Key{Backend: estimator.WhisperCpp, Model: "tiny", GPUModel: "other"}
	r.learnStream(key, placement.Lease{GPU: "GPU-1", GPUName: "NVIDIA L4"}, plugins.MemoryReport{KVSelfBytes: 10, KVCrossBytes: 20, TotalBytes: 40})
	r.learnStream(key, placement.Lease{GPU: placement.CPU}, plugins.MemoryReport{TotalBytes: 40})
	r.learnStream(key, placement.Lease{GPU: "GPU-1", GPUName: "NVIDIA L4"}, plugins.MemoryReport{})
	want := key
	want.GPUModel = "NVIDIA L4"
	if len(got) != 1 || got[want.Stream().String()] != 40 {
		t.Errorf("recorded %v, want 40 bytes under %s", got, want.Stream())
	}
}
