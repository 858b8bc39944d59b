package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/daemon/api"
	"github.com/wsched/wsched/daemon/store"
	"github.com/wsched/wsched/daemon/upkeep"
	"github.com/wsched/wsched/internal/config"
	"github.com/wsched/wsched/placement"
)

// damageNewestMeta flips the checksum of bbolt's newest meta page, so that
// bbolt falls back to the commit before it.
func damageNewestMeta(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(binary.LittleEndian.Uint32(data[16+8:]))
	newest := 0
	if binary.LittleEndian.Uint64(data[pageSize+64:]) > binary.LittleEndian.Uint64(data[64:]) {
		newest = pageSize
	}
	data[newest+72] ^= 0xff
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedMetaRefusesToStart: two 4 GiB leases held by this process,
// each folded into bbolt at a clean shutdown; the newest meta page is
// damaged. The daemon refuses to start (it used to start without the
// second lease and grant its 4 GiB again); after `wsched state repair`
// both come back.
func TestDamagedMetaRefusesToStart(t *testing.T) {
	if fig, ok := relCorruptMeta(t); !ok {
		t.Error(fig)
	}
}

// relCorruptMeta is the scenario (and the reliability row): it reports
// what the start did and how many of the two leases repair brought back.
func relCorruptMeta(t *testing.T) (string, bool) {
	var cfg *config.Config
	var ids []string
	for range 2 {
		var td *testDaemon
		if cfg == nil {
			td = startDaemon(t, 1, 24*GiB, nil)
			cfg = td.cfg
		} else {
			td = runDaemon(t, cfg)
		}
		l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 4 * GiB})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, l.ID)
		td.stop()
	}
	damageNewestMeta(t, filepath.Join(cfg.Daemon.StateDir, store.FileName))
	d, err := New(Options{Config: cfg})
	if err == nil {
		d.close()
		return "started without refusing", false
	}
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "wsched state repair") {
		return fmt.Sprintf("start failed without naming 'wsched state repair': %v", err), false
	}
	if _, err := store.Repair(cfg.Daemon.StateDir, time.Now()); err != nil {
		t.Fatal(err)
	}
	td := runDaemon(t, cfg)
	ls, err := td.c.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	back := 0
	for _, l := range ls {
		if slices.Contains(ids, l.ID) && l.State == "granted" && l.Reason == "" {
			back++
		}
	}
	return fmt.Sprintf("start refused; repair restored %d of 2 leases", back), back == 2
}

// TestRestoredOvercommitMarked: a restored state whose leases exceed the
// GPU (here a 22 GiB lease added beside a 4 GiB one on a 24 GiB GPU) keeps
// both for their live holder but marks the later one.
func TestRestoredOvercommitMarked(t *testing.T) {
	td := startDaemon(t, 1, 24*GiB, nil)
	l, err := td.c.Acquire(context.Background(), api.LeaseRequest{MemoryBytes: 4 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	td.stop()
	db, err := store.Open(td.cfg.Daemon.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := db.Leases()
	if err != nil || len(ls) != 1 {
		t.Fatalf("stored leases: %v, %v", ls, err)
	}
	extra := ls[0]
	extra.ID, extra.Bytes, extra.Granted = "l-extra", 22*GiB, extra.Granted.Add(time.Second)
	if err := db.Apply([]placement.Change{{Put: &extra}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	td = runDaemon(t, td.cfg)
	for _, want := range []struct{ id, reason string }{{l.ID, ""}, {"l-extra", upkeep.OvercommitReason}} {
		got, err := td.c.Lease(context.Background(), want.id)
		if err != nil || got.State != "granted" || got.Reason != want.reason {
			t.Errorf("lease %s: %s %q, %v; want granted %q", want.id, got.State, got.Reason, err, want.reason)
		}
	}
}
