package sherpa

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cudaProvider returns the path of ONNX Runtime's CUDA provider library
// when one sits next to the libonnxruntime.so this process mapped (ONNX
// Runtime loads libonnxruntime_providers_cuda.so from there), else "".
func cudaProvider() string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(filepath.Base(fields[5]), "libonnxruntime.so") {
			continue
		}
		p := filepath.Join(filepath.Dir(fields[5]), "libonnxruntime_providers_cuda.so")
		if fileExists(p) {
			return p
		}
		return ""
	}
	return ""
}

// residentBytes is the process's resident set size (VmRSS); 0 when unknown.
func residentBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
