package store

import (
	"errors"
	"testing"
	"time"

	"github.com/wsched/wsched/placement"
)

func TestLeasesSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	l := placement.Lease{ID: "l-1", State: placement.StateGranted, GPU: "GPU-a", Bytes: 4 << 30, Holder: placement.Holder{PID: 7, UID: 1000, StartTicks: 99},
		TTL: time.Minute, Expires: time.Now().Add(time.Minute).Round(0)}
	if err := db.PutLease(l); err != nil {
		t.Fatal(err)
	}
	if err := db.PutLease(placement.Lease{ID: "l-2"}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteLease("l-2"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteLease("l-missing"); err != nil {
		t.Errorf("deleting a missing lease: %v", err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrLocked) {
		t.Errorf("second open while held: %v, want ErrLocked", err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Leases()
	if err != nil || len(got) != 1 {
		t.Fatalf("leases after reopen: %v, %v", got, err)
	}
	if g := got[0]; g.ID != l.ID || g.Bytes != l.Bytes || g.Holder != l.Holder || !g.Expires.Equal(l.Expires) || g.TTL != l.TTL {
		t.Errorf("round trip: %+v, want %+v", g, l)
	}
}

func TestApply(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, b := placement.Lease{ID: "a", Bytes: 1}, placement.Lease{ID: "b", Bytes: 2}
	if err := db.Apply([]placement.Change{{Put: &a}, {Put: &b}, {Delete: "a"}, {Delete: "never-there"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := db.Leases()
	if len(got) != 1 || got[0].ID != "b" {
		t.Errorf("after Apply: %+v", got)
	}
}
