package store

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/placement"
)

// fullLease sets every field of a lease, nested ones too.
func fullLease() placement.Lease {
	at := func(s int64) time.Time { return time.Unix(1_800_000_000+s, 123456789).UTC() }
	return placement.Lease{ID: "l-full", State: placement.StateGranted, GPU: "GPU-a", GPUIndex: 3, GPUName: "H100",
		GPUTotalBytes: 80 << 30, Bytes: 4 << 30, Device: device.Spec{Kind: device.UUID, Index: 2, UUID: "GPU-5a1c0a4e-0000-1111-2222-333344445555"},
		Priority: placement.High, Holder: placement.Holder{PID: 42, UID: 1000, Name: "asr", StartTicks: 1 << 40},
		PIDs: []int{43, -1, 1 << 30}, PIDStarts: map[int]uint64{43: 1 << 41, -1: 0}, TTL: time.Minute, Created: at(1), Granted: at(2), Expires: at(3), Ended: at(4),
		Reason: "released", UsedBytes: 3 << 30, PeakBytes: 5 << 30, Overrun: true, Labels: map[string]string{"a": "1", "": "é"},
		EstimateKey: &estimator.Key{Backend: "whisper", Model: "large-v3", Precision: "f16", Beam: 5, Batch: 2, GPUModel: "H100", Driver: "550", Part: estimator.PartStream},
		Reclaimable: true, ReclaimableSince: at(5), MaxBytes: 6 << 30}
}

// zeroFields names the fields of v (recursively through structs and
// pointers to them) that are zero.
func zeroFields(v reflect.Value, path string) []string {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct || v.Type() == reflect.TypeFor[time.Time]() {
		if v.IsZero() {
			return []string{path}
		}
		return nil
	}
	var out []string
	for i := 0; i < v.NumField(); i++ {
		if !v.Type().Field(i).IsExported() { // the engine's own bookkeeping, not stored
			continue
		}
		out = append(out, zeroFields(v.Field(i), path+"."+v.Type().Field(i).Name)...)
	}
	return out
}

// TestLeaseCodecRoundTrip: every field of a lease survives the binary
// form. It fails when Lease gains a field fullLease does not set: add the
// field to encodeLease and decodeLease, then here.
func TestLeaseCodecRoundTrip(t *testing.T) {
	l := fullLease()
	if zero := zeroFields(reflect.ValueOf(l), "Lease"); len(zero) > 0 {
		t.Fatalf("fields not set (and maybe not stored): %v", zero)
	}
	resized := placement.Lease{ID: "l-resized", MaxBytes: 3 << 30}                                      // the tail without a key
	streamKey := placement.Lease{ID: "l-part", EstimateKey: &estimator.Key{Part: estimator.PartStream}} // the tail without a resize
	for _, in := range []placement.Lease{l, {ID: "l-min"}, {ID: "l-empty", Labels: map[string]string{}}, resized, streamKey} {
		var out placement.Lease
		if err := decodeLease(encodeLease(nil, &in), &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
		}
	}
	zoned := placement.Lease{ID: "l-zone", Expires: time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 5*3600+1800))}
	var out placement.Lease
	if err := decodeLease(encodeLease(nil, &zoned), &out); err != nil || !out.Expires.Equal(zoned.Expires) {
		t.Errorf("zoned time: %v, %v", out.Expires, err)
	}
}

// TestLeasesStoredAsJSONStillRead: leases earlier versions stored as JSON,
// in bbolt and in journal records, are read, and compaction rewrites them
// in the binary form.
func TestLeasesStoredAsJSONStillRead(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, inJournal := fullLease(), lease("l-journal")
	if err := Put(db.Bolt(), bucketLeases, old.ID, old); err != nil { // Put writes JSON
		t.Fatal(err)
	}
	for _, k := range [][]byte{formatKey, keyJournal} { // as before the binary form and the journal header
		if err := Delete(db.Bolt(), bucketMeta, string(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, EpochName)); err != nil {
		t.Fatal(err)
	}
	db.wal.close()
	db.db.Close()
	var rec []byte
	for _, r := range []walRecord{{Put: &inJournal}, {Put: ptr(lease("l-gone"))}, {Del: "l-gone"}} {
		payload, _ := json.Marshal(r)
		rec = binary.LittleEndian.AppendUint32(rec, uint32(len(payload)))
		rec = binary.LittleEndian.AppendUint32(rec, crc32.Checksum(payload, crcTable))
		rec = append(rec, payload...)
	}
	if err := os.WriteFile(filepath.Join(dir, WALName), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // as written by an earlier version, then after compaction
		db, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.Leases()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]placement.Lease{old.ID: old, inJournal.ID: inJournal}
		if len(got) != len(want) {
			t.Fatalf("leases %+v, want %v", got, want)
		}
		for _, l := range got {
			w := want[l.ID]
			if string(mustJSON(t, l)) != string(mustJSON(t, w)) {
				t.Errorf("lease %s:\n got %+v\nwant %+v", l.ID, l, w)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Bolt().View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
			if v[0] != leaseV2 {
				t.Errorf("lease %s still stored as %q…", k, v[:1])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeLease: the decoder never panics, and what it accepts encodes
// to a form that decodes to the same lease.
func FuzzDecodeLease(f *testing.F) {
	full, minimal := fullLease(), placement.Lease{ID: "l"}
	for _, l := range []*placement.Lease{&full, &minimal} {
		b := encodeLease(nil, l)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	j, _ := json.Marshal(full)
	f.Add(j)
	f.Add([]byte{leaseV1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l placement.Lease
		if err := decodeLease(b, &l); err != nil || (len(b) > 0 && b[0] == '{') {
			return
		}
		var again placement.Lease
		if err := decodeLease(encodeLease(nil, &l), &again); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(l, again) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", again, l)
		}
	})
}

// v1Lease is l as the previous version stored it: leaseV1, no PID start
// times, no checksum.
func v1Lease(l placement.Lease) []byte {
	body := appendLeaseBody(nil, &l)
	return append([]byte{leaseV1}, body[:len(body)-1]...) // without the empty PID start times
}

// TestPreviousVersionStateRead: a state dir as the previous version left
// it after a crash — leaseV1 values in bbolt (leases_format 1), a journal
// without a header whose records carry leaseV1 payloads, an epoch of one
// "seq" line — opens with every lease, and is rewritten in the current
// form (checksummed values, a journal with a header, the epoch with the
// journal).
func TestPreviousVersionStateRead(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, inJournal := lease("l-old"), lease("l-journal")
	err = db.Bolt().Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketLeases).Put([]byte(old.ID), v1Lease(old)); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyJournal); err != nil {
			return err
		}
		return meta.Put(formatKey, []byte{leaseV1})
	})
	if err != nil {
		t.Fatal(err)
	}
	db.wal.close()
	db.db.Close()
	var rec []byte
	for _, r := range []walRecord{{Put: &inJournal}, {Put: ptr(lease("l-gone"))}, {Del: "l-gone"}} {
		payload := []byte{walDel}
		if r.Put != nil {
			payload = append([]byte{walPut}, v1Lease(*r.Put)...)
		} else {
			payload = append(payload, r.Del...)
		}
		rec = binary.LittleEndian.AppendUint32(rec, uint32(len(payload)))
		rec = binary.LittleEndian.AppendUint32(rec, crc32.Checksum(payload, crcTable))
		rec = append(rec, payload...)
	}
	rec = append(rec, make([]byte, 4096)...) // the zeros it was grown by
	if err := os.WriteFile(filepath.Join(dir, WALName), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, EpochName), []byte("seq 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db); !reflect.DeepEqual(got, []string{"l-journal", "l-old"}) {
		t.Errorf("leases %v, want [l-journal l-old]", got)
	}
	if !reflect.DeepEqual(db.wal.head, walHead{gen: 1, base: 1}) {
		t.Errorf("journal after the upgrade: %+v, want a header (generation 1 after commit 1)", db.wal.head)
	}
	db.Close()
	if ep, err := readEpoch(dir); err != nil || ep.gen == 0 {
		t.Errorf("epoch after the upgrade: %+v, %v", ep, err)
	}
}

// TestLeaseUntailedByteIdentical: a lease never resized and without an
// estimate key part is stored byte for byte as the encoder before leaseV2's
// optional tail wrote it (testdata/lease-v2-untailed.hex: fullLease, less
// the tail's fields, encoded by that encoder), so earlier binaries read it.
func TestLeaseUntailedByteIdentical(t *testing.T) {
	golden, err := os.ReadFile("testdata/lease-v2-untailed.hex")
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(golden)))
	if err != nil {
		t.Fatal(err)
	}
	l := fullLease()
	l.MaxBytes, l.EstimateKey.Part = 0, ""
	if got := encodeLease(nil, &l); !bytes.Equal(got, want) {
		t.Fatalf("untailed lease:\n got %x\nwant %x", got, want)
	}
	l = fullLease()
	if got := encodeLease(nil, &l); len(got) <= len(want) || !bytes.Equal(got[:len(want)-leaseSum], want[:len(want)-leaseSum]) {
		t.Fatalf("tailed lease does not extend the untailed form:\n got %x\nwant %x…", got, want[:len(want)-leaseSum])
	}
}

// TestLeaseTailRefused: a tail the encoder never writes is refused, not
// read: an empty one (nothing to add: no tail is written) and a part with
// no estimate key to hold it. Both carry a valid checksum.
func TestLeaseTailRefused(t *testing.T) {
	plain := encodeLease(nil, &placement.Lease{ID: "l"})
	body := plain[:len(plain)-leaseSum]
	for name, tail := range map[string][]byte{"empty": {0, 0}, "part without key": append([]byte{0, 6}, "stream"...)} {
		v := append(append([]byte{}, body...), tail...)
		v = binary.LittleEndian.AppendUint32(v, crc32.Checksum(v, crcTable))
		var l placement.Lease
		if err := decodeLease(v, &l); !errors.Is(err, errLeaseCodec) {
			t.Errorf("%s tail: err %v, want %v", name, err, errLeaseCodec)
		}
	}
}
