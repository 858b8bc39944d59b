package store

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/placement"
)

// benchLease is a lease as the daemon stores one.
func benchLease(i int) placement.Lease {
	now := time.Unix(1_800_000_000, int64(i)).UTC()
	return placement.Lease{ID: fmt.Sprintf("l-%016x", i), State: placement.StateGranted,
		GPU: fmt.Sprintf("GPU-%08x-1111-2222-3333-444455556666", i%512), GPUIndex: i % 512, GPUName: "NVIDIA H100 80GB HBM3",
		GPUTotalBytes: 80 << 30, Bytes: 600 << 20, Device: device.Spec{Kind: device.Auto}, Priority: placement.Normal,
		Holder: placement.Holder{PID: 1000 + i%16, UID: 1000, Name: "wsched", StartTicks: 123456},
		TTL:    time.Hour, Created: now, Granted: now, Expires: now.Add(time.Hour)}
}

// BenchmarkDecodeLeases decodes the stored leases a restart reads (100k;
// WSCHED_BENCH_LEASES=N changes it), on every CPU as Leases does, in the
// binary form ("binary") and in the JSON that was stored before ("json",
// the old path), alternating one pass of each, and reports both and their
// ratio.
func BenchmarkDecodeLeases(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("WSCHED_BENCH_LEASES")); err == nil && v > 0 {
		n = v
	}
	bin, js, keys := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range n {
		l := benchLease(i)
		keys[i] = []byte(l.ID)
		bin[i] = encodeLease(nil, &l)
		var err error
		if js[i], err = json.Marshal(l); err != nil {
			b.Fatal(err)
		}
	}
	wrap := func(_ int, err error) error { return err }
	pass := func(vals [][]byte, decode func(k, v []byte, l *placement.Lease) error) time.Duration {
		out := make([]placement.Lease, n)
		start := time.Now()
		if err := decodeAll(keys, vals, out, decode, wrap); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	jsonDecode := func(_, v []byte, l *placement.Lease) error { return json.Unmarshal(v, l) }
	var tBin, tJSON time.Duration
	for b.Loop() {
		tBin += pass(bin, decodeStored)
		tJSON += pass(js, jsonDecode)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(tBin), "binary-ms/op")
	b.ReportMetric(ms(tJSON), "json-ms/op")
	b.ReportMetric(float64(tJSON)/float64(tBin), "json/binary")
	b.Logf("%d leases: binary %.1f ms, json (old) %.1f ms, %.1f× faster", n, ms(tBin), ms(tJSON), float64(tJSON)/float64(tBin))
}
