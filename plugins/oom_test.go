package plugins

import "testing"

func TestFailedAllocationBytes(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want int64
	}{
		{"out of memory: whisper.cpp failed to allocate memory: ggml_backend_cuda_buffer_type_alloc_buffer: allocating 3094.36 MiB on device 0: cudaMalloc failed: out of memory", 3244671632},
		{"alloc_tensor_range: failed to allocate CUDA0 buffer of size 3244672000", 3244672000},
		{"allocating 1.00 MiB on device 0: x; failed to allocate CUDA0 buffer of size 5000000", 5000000},
		{"out of memory", 0},
		{"buffer of size 99999999999999999999999", 0},
		{"", 0},
	} {
		if got := FailedAllocationBytes(tt.msg); got != tt.want {
			t.Errorf("FailedAllocationBytes(%q) = %d, want %d", tt.msg, got, tt.want)
		}
	}
}

func FuzzFailedAllocationBytes(f *testing.F) {
	f.Add("allocating 3094.36 MiB on device 0: cudaMalloc failed: out of memory")
	f.Add("failed to allocate CUDA0 buffer of size 3244672000")
	f.Fuzz(func(t *testing.T, msg string) {
		if b := FailedAllocationBytes(msg); b < 0 || b >= 1<<50 {
			t.Fatalf("FailedAllocationBytes(%q) = %d", msg, b)
		}
	})
}
