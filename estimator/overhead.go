package estimator

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/wsched/wsched/internal/units"
)

// OverheadRow is the per-process CUDA overhead of one GPU generation: what a
// process holds besides the buffers a backend sizes itself. Sources are in
// docs/estimator.md ("CUDA overhead per GPU generation").
type OverheadRow struct {
	// Generation names the row ("hopper", "ada", …; "unknown" for a GPU no
	// row matches, which takes the largest measured figures).
	Generation string `json:"generation"`
	// ContextBytes is the CUDA context of a minimal process (driver
	// context, module images, default stream): the context term.
	ContextBytes int64 `json:"context_bytes"`
	// CuBLASWorkspaceBytes is cuBLAS's default workspace per handle
	// (32 MiB on Hopper and Blackwell, 4 MiB before).
	CuBLASWorkspaceBytes int64 `json:"cublas_workspace_bytes"`
	// Source says where ContextBytes comes from.
	Source string `json:"source"`

	match *regexp.Regexp
}

// ggml-cuda's runtime beyond the context and cuBLAS (kernel images loaded
// lazily, CUDA graphs, the VMM pool's granularity): a fixed part plus a
// share of the weight bytes, fitted on the H100 table so that every row is
// covered (docs/estimator.md; TestH100FirstRunNeverUnder).
const (
	ggmlRuntimeFixed         = 72 * MiB
	ggmlRuntimePerWeightByte = 0.01
)

// overheadRows is matched in order against the lower-cased NVML name.
var overheadRows = []OverheadRow{
	{Generation: "hopper", ContextBytes: 520 * MiB, CuBLASWorkspaceBytes: 32 * MiB,
		Source: "measured: H100 80GB HBM3, driver 580, CUDA 13 (shared/measurements/h100-whisper-cuda.md)",
		match:  regexp.MustCompile(`\b(gh|h)(100|200|800|20)\b`)},
	{Generation: "blackwell", ContextBytes: 520 * MiB, CuBLASWorkspaceBytes: 32 * MiB,
		Source: "not measured: taken as Hopper (same cuBLAS workspace, larger SM count)",
		match:  regexp.MustCompile(`\b(gb|b)(100|200|300)\b|rtx 50\d\d|blackwell`)},
	{Generation: "ada", ContextBytes: 400 * MiB, CuBLASWorkspaceBytes: 4 * MiB,
		Source: "public reports of a minimal CUDA 12 process on RTX 4090 / L4 (300–400 MiB); the upper end",
		match:  regexp.MustCompile(`\bl(4|40s?|20)\b|rtx 40\d\d|\bada\b`)},
	{Generation: "ampere", ContextBytes: 400 * MiB, CuBLASWorkspaceBytes: 4 * MiB,
		Source: "the figure faster-whisper's published peaks on an RTX 3070 Ti fit (docs/estimator.md)",
		match:  regexp.MustCompile(`\ba(100|800|10g?|30|40|16|2)\b|rtx 30\d\d|rtx a\d{4}`)},
	{Generation: "turing-volta", ContextBytes: 400 * MiB, CuBLASWorkspaceBytes: 4 * MiB,
		Source: "the former flat default (T4, V100, RTX 20xx)",
		match:  regexp.MustCompile(`\b(t4|v100)\b|rtx 20\d\d|titan v|quadro rtx`)},
}

// unknownRow applies when the GPU is not known (or matches no row): the
// largest measured figures, so a first run is not under.
var unknownRow = OverheadRow{Generation: "unknown", ContextBytes: DefaultCUDAContextBytes, CuBLASWorkspaceBytes: 32 * MiB,
	Source: "GPU not known: the largest row (Hopper, measured)"}

// DefaultCUDAContextBytes is the context term for a GPU no row matches
// (and no [estimator] cuda_context): the Hopper figure, the largest measured.
const DefaultCUDAContextBytes = 520 * MiB

// OverheadFor returns the overhead row for a GPU model (NVML's name).
func OverheadFor(gpuModel string) OverheadRow {
	name := strings.ToLower(gpuModel)
	for _, r := range overheadRows {
		if r.match.MatchString(name) {
			return r
		}
	}
	return unknownRow
}

// OverheadRows returns the table (copies).
func OverheadRows() []OverheadRow {
	return append([]OverheadRow(nil), overheadRows...)
}

// contextFor is the context term for a GPU model: [estimator] cuda_context
// when set, else the row's; with the explain line saying which.
func (e *Estimator) contextFor(gpuModel string) (int64, OverheadRow, string) {
	row := OverheadFor(gpuModel)
	gpu := gpuModel
	if gpu == "" {
		gpu = "no GPU named"
	}
	if e.cfg.CUDAContextBytes > 0 {
		return e.cfg.CUDAContextBytes, row, fmt.Sprintf("context: %s from [estimator] cuda_context (overrides the %s row, %s, for %s)",
			units.FormatBytes(e.cfg.CUDAContextBytes), row.Generation, units.FormatBytes(row.ContextBytes), gpu)
	}
	return row.ContextBytes, row, fmt.Sprintf("context: %s from the overhead row %q for %s (%s)",
		units.FormatBytes(row.ContextBytes), row.Generation, gpu, row.Source)
}

// ggmlRuntime is whisper.cpp's CUDA overhead beyond context and buffers:
// cuBLAS workspace plus ggml's runtime term.
func ggmlRuntime(row OverheadRow, weights int64) int64 {
	return row.CuBLASWorkspaceBytes + ggmlRuntimeFixed + ceilMul(weights, ggmlRuntimePerWeightByte)
}
