package main

import (
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/api/convert"
	"github.com/wsched/wsched/internal/testtmp"
)

// TestEstimateExplainLearnedFromDaemon: with a daemon answering on the
// socket, wsched estimate applies what it measured — peaks under the
// estimate key, the CUDA context for the GPU model and driver — and
// --explain says so, with the sample counts.
func TestEstimateExplainLearnedFromDaemon(t *testing.T) {
	const gpu = "NVIDIA GeForce RTX 4090"
	peaks := []int64{900 << 20, 950 << 20, 1000 << 20}
	var asked []api.SamplesRequest
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/estimator/samples", func(w http.ResponseWriter, r *http.Request) {
		var req api.SamplesRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		asked = append(asked, req)
		out := api.Samples{Samples: []int64{}}
		switch {
		case req.Key != nil && convert.ToKey(*req.Key).GPUModel == gpu && req.Key.Model == "base":
			out.Samples = peaks
		case strings.HasPrefix(req.Context, gpu):
			out.Samples = []int64{450 << 20, 460 << 20}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	sock := filepath.Join(testtmp.ShortDir(t), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	out, _, err := runCLI(t, nil, "estimate", "--model", "base", "--explain", "--gpu", "1", "--config", seedSim, "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"  - context: learned 460.00 MiB for " + gpu,
		"(p95 of 2 samples) instead of 400.00 MiB",
		"  - learning: p95 of 3 measured peaks is 1000.00 MiB",
		"  - learning: measured peaks and CUDA contexts from the daemon on " + sock,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if len(asked) < 3 {
		t.Errorf("the daemon was asked %d times (probe, context, peaks): %+v", len(asked), asked)
	}
	// --no-daemon: the formula alone.
	out, _, err = runCLI(t, nil, "estimate", "--model", "base", "--explain", "--gpu", "1", "--config", seedSim, "--socket", sock, "--no-daemon")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "learning: --no-daemon") || strings.Contains(out, "context: learned") {
		t.Errorf("--no-daemon still learned:\n%s", out)
	}
}
