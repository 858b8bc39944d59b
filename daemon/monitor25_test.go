package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/client"
)

// holdLeases grants n leases of 1 MiB, each with labels of about
// labelBytes in all (in values of at most 1000 bytes).
func holdLeases(t *testing.T, td *testDaemon, n, labelBytes int) {
	t.Helper()
	labels := map[string]string{}
	for i := 0; labelBytes > 0; i++ {
		v := min(labelBytes, 1000)
		labels[fmt.Sprint("note", i)] = strings.Repeat("x", v)
		labelBytes -= v
	}
	for range n {
		if _, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 1 << 20, TTLSeconds: 3600, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
}

// monitorStreams opens n /v1/monitor/events streams over the socket and
// reads them (discarding) until the test ends; it returns once each has
// sent its first frame.
func monitorStreams(t *testing.T, socket string, n int) {
	t.Helper()
	var ready sync.WaitGroup
	for range n {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprint(conn, "GET /v1/monitor/events HTTP/1.1\r\nHost: wsched\r\n\r\n")
		ready.Add(1)
		go func() {
			br := bufio.NewReader(conn)
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := br.ReadString('\n'); err == nil {
				for line, err := br.ReadString('\n'); err == nil && !strings.HasPrefix(line, "data: "); line, err = br.ReadString('\n') {
				}
			}
			_ = conn.SetReadDeadline(time.Time{})
			ready.Done()
			_, _ = io.Copy(io.Discard, br)
		}()
	}
	ready.Wait()
}

// TestMonitorStreamCarriesDeltas: with 200 leases held, a placement frame
// is the event alone (its size does not grow with the leases), and a client
// that applies the frames (client.Monitor) ends with the daemon's leases.
func TestMonitorStreamCarriesDeltas(t *testing.T) {
	td := startDaemon(t, 2, 8*GiB, nil)
	holdLeases(t, td, 200, 1000)
	conn, err := net.Dial("unix", td.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprint(conn, "GET /v1/monitor/events HTTP/1.1\r\nHost: wsched\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan [2]string, 1024)
	go func() {
		defer close(frames)
		_ = client.ReadSSE(resp.Body, func(event, data string) error { frames <- [2]string{event, data}; return nil })
	}()
	next := func() [2]string {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatal("the stream ended")
			}
			return f
		case <-time.After(10 * time.Second):
			t.Fatal("no frame for 10 s")
		}
		return [2]string{}
	}
	if f := next(); f[0] != "snapshot" || len(f[1]) < 200*1000 {
		t.Fatalf("first frame %s of %d bytes, want a snapshot with every lease", f[0], len(f[1]))
	}

	// A client that rebuilds the GPUs from the frames.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var rebuilt api.GPUs
	go func() {
		_ = td.c.Monitor(ctx, func(fr api.MonitorFrame) error {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case fr.Snapshot != nil:
				rebuilt = fr.Snapshot.GPUs
			case fr.Placement != nil:
				rebuilt = fr.Placement.GPUs
			case fr.GPUs != nil:
				rebuilt = *fr.GPUs
			}
			return nil
		})
	}()

	l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	q, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 1 << 20, Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := td.c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
	var placements, accounts int
	for released := false; !released || accounts == 0; {
		f := next()
		switch f[0] {
		case "placement":
			placements++
			if len(f[1]) > 4096 {
				t.Errorf("a placement frame of %d bytes with 200 leases held: %.200s…", len(f[1]), f[1])
			}
			released = released || strings.Contains(f[1], `"type":"released"`)
		case "accounts":
			if released {
				accounts++
			}
		}
	}
	if placements < 3 {
		t.Errorf("%d placement frames for two grants and a release", placements)
	}

	want := leasesOf(td.gpus(t))
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := leasesOf(rebuilt)
		mu.Unlock()
		if slices.Equal(got, want) && slices.Contains(got, q.ID) && !slices.Contains(got, l.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client.Monitor rebuilt %d leases, the daemon holds %d", len(got), len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (td *testDaemon) gpus(t *testing.T) api.GPUs {
	t.Helper()
	g, err := td.c.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// leasesOf lists the IDs of g's leases (GPUs, CPU, queue), sorted.
func leasesOf(g api.GPUs) []string {
	var ids []string
	for _, gpu := range g.GPUs {
		for _, l := range gpu.Leases {
			ids = append(ids, l.ID)
		}
	}
	for _, l := range append(slices.Clone(g.CPU), g.Queue...) {
		ids = append(ids, l.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestLeaseLabelsBounded: a lease request with a 60 KiB label is refused
// with a 400 that names the bound (every event and monitor frame carries a
// lease's labels).
func TestLeaseLabelsBounded(t *testing.T) {
	td := startDaemon(t, 1, 8*GiB, nil)
	status, body := td.raw("POST", "/v1/leases", fmt.Sprintf(`{"memory_bytes": 1048576, "labels": {"note": %q}}`, strings.Repeat("x", 60<<10)))
	if status != http.StatusBadRequest || !strings.Contains(body, "at most 1024 are allowed") {
		t.Errorf("a 60 KiB label: %d %s, want 400 naming the bound", status, body)
	}
}
