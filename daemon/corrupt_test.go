package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
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

// TestDamagedMetaRefusesToStart: two leases held by this process, each
// folded into bbolt at a clean shutdown; the newest meta page is damaged.
// The daemon refuses to start (it used to start without the second lease
// and grant its 4 GiB again); after `wsched state repair` both come back.
func TestDamagedMetaRefusesToStart(t *testing.T) {
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
	_, err := New(Options{Config: cfg})
	if !errors.Is(err, store.ErrDamaged) || !strings.Contains(err.Error(), "wsched state repair") {
		t.Fatalf("start over a damaged meta page: %v; want a refusal naming 'wsched state repair'", err)
	}
	if _, err := store.Repair(cfg.Daemon.StateDir, time.Now()); err != nil {
		t.Fatal(err)
	}
	td := runDaemon(t, cfg)
	ls, err := td.c.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, l := range ls {
		got[l.ID] = l.State == "granted" && l.Reason == ""
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("lease %s after repair: %+v", id, ls)
		}
	}
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
