package estimator_test

import (
	"os"

	"github.com/wsched/wsched/estimator"
)

// The medium model on a 12 GiB GPU, whisper.cpp profile and seed formula
// side by side (docs/estimator.md shows this output).
func Example_mediumWhisperCppVersusSeed() {
	gpus := []estimator.GPUFree{{Index: 0, Name: "NVIDIA GeForce RTX 3060", AvailableBytes: 12 * estimator.GiB}}
	for _, b := range []estimator.Backend{estimator.WhisperCpp, estimator.Seed} {
		r, err := estimator.Estimate(estimator.Request{Backend: b, Model: "medium", GPUs: gpus})
		if err != nil {
			panic(err)
		}
		_ = r.WriteText(os.Stdout, false)
	}
	// Output:
	// backend      whisper.cpp
	// model        medium (f16)
	// total        2.31 GiB (formula)
	// recommended  2.54 GiB
	// breakdown      weights       1.43 GiB
	//                kv_self       48.00 MiB
	//                kv_cross      144.00 MiB
	//                kv_pad        6.00 MiB
	//                compute       164.74 MiB
	//                cuda_pool     47.45 MiB
	//                cuda_runtime  90.62 MiB
	//                context       400.00 MiB
	// gpu 0 (NVIDIA GeForce RTX 3060): 12.00 GiB available, sufficient, 4 copies
	// suggestions:
	//   - a smaller model (small): 2.31 GiB → 1.19 GiB (saves 1.12 GiB)
	//   - a quantized q8_0 model file: 2.31 GiB → 1.74 GiB (saves 577.89 MiB)
	//   - a quantized q5_0 model file: 2.31 GiB → 1.48 GiB (saves 851.60 MiB)
	// backend      seed
	// model        medium (float16)
	// total        4.22 GiB (formula)
	// recommended  5.06 GiB
	// breakdown      weights   2.50 GiB
	//                audio     384.00 MiB
	//                batch     588.80 MiB
	//                overhead  787.20 MiB
	// gpu 0 (NVIDIA GeForce RTX 3060): 12.00 GiB available, sufficient, 2 copies
	// suggestions:
	//   - a smaller model: small
	//   - lower precision: int8
}
