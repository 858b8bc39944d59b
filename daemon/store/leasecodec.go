package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wsched/wsched/estimator"
	"github.com/wsched/wsched/internal/device"
	"github.com/wsched/wsched/placement"
)

// Stored leases (bbolt values and journal records) are in a compact binary
// form: a restart decodes 100k of them, and JSON decoding was most of the
// start-up. The first byte is the version: leaseV1, then the fields in the
// order of appendLease, integers as varints, strings and times length-
// prefixed. A value starting with '{' is a lease in the JSON that earlier
// versions stored: still read (in journal records), and rewritten in
// binary when an earlier version's database is first opened (initLeases).
const leaseV1 = 1

// formatKey, in bucketMeta (with the commit sequence, epoch.go), is the
// stored form of the leases bucket, absent while it may hold JSON.
var formatKey = []byte("leases_format")

// initLeases creates the leases bucket, or rewrites the JSON leases of an
// earlier version in the binary form, once.
func initLeases(tx *bolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(bucketLeases)
	if err != nil {
		return err
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil || meta.Get(formatKey) != nil {
		return err
	}
	rewrite := map[string][]byte{}
	err = b.ForEach(func(k, v []byte) error {
		if len(v) == 0 || v[0] != '{' {
			return nil
		}
		var l placement.Lease
		if err := json.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("migrate lease %s: %w", k, err)
		}
		rewrite[string(k)] = encodeLease(nil, &l)
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(rewrite)) {
		if err := b.Put([]byte(k), rewrite[k]); err != nil {
			return err
		}
	}
	return meta.Put(formatKey, []byte{leaseV1})
}

var errLeaseCodec = errors.New("malformed stored lease")

// encodeLease appends l's stored form to b.
func encodeLease(b []byte, l *placement.Lease) []byte {
	b = append(b, leaseV1)
	b = putStrings(b, l.ID, string(l.State), l.GPU)
	b = putInts(b, int64(l.GPUIndex))
	b = putStrings(b, l.GPUName)
	b = putInts(b, l.GPUTotalBytes, l.Bytes, int64(l.Device.Kind), int64(l.Device.Index))
	b = putStrings(b, l.Device.UUID)
	b = putInts(b, int64(l.Priority), int64(l.Holder.PID), int64(l.Holder.UID))
	b = putStrings(b, l.Holder.Name)
	b = binary.AppendUvarint(b, l.Holder.StartTicks)
	b = putInts(b, int64(len(l.PIDs)))
	for _, pid := range l.PIDs {
		b = putInts(b, int64(pid))
	}
	b = putInts(b, int64(l.TTL))
	b = putTimes(b, l.Created, l.Granted, l.Expires, l.Ended)
	b = putStrings(b, l.Reason)
	b = putInts(b, l.UsedBytes, l.PeakBytes)
	b = append(b, flags(l.Overrun, l.Reclaimable, l.EstimateKey != nil, l.Labels != nil))
	b = putTimes(b, l.ReclaimableSince)
	if k := l.EstimateKey; k != nil {
		b = putStrings(b, string(k.Backend), k.Model, k.Precision)
		b = putInts(b, int64(k.Beam), int64(k.Batch))
		b = putStrings(b, k.GPUModel, k.Driver)
	}
	if l.Labels != nil {
		b = putInts(b, int64(len(l.Labels)))
		for _, k := range slices.Sorted(maps.Keys(l.Labels)) {
			b = putStrings(b, k, l.Labels[k])
		}
	}
	return b
}

func flags(bits ...bool) byte {
	var f byte
	for i, on := range bits {
		if on {
			f |= 1 << i
		}
	}
	return f
}

func putStrings(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

func putInts(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func putTimes(b []byte, ts ...time.Time) []byte {
	for _, t := range ts {
		if t.IsZero() {
			b = append(b, 0)
			continue
		}
		n := len(b)
		b = append(b, 0)
		if out, err := t.AppendBinary(b); err == nil {
			b = out
		} else { // an offset that is not whole minutes: keep the instant
			b, _ = t.UTC().AppendBinary(b)
		}
		b[n] = byte(len(b) - n - 1)
	}
	return b
}

// decodeLease decodes a stored lease: the binary form, or the JSON of
// earlier versions.
func decodeLease(v []byte, l *placement.Lease) error {
	if len(v) > 0 && v[0] == '{' {
		return json.Unmarshal(v, l)
	}
	if len(v) == 0 || v[0] != leaseV1 {
		return fmt.Errorf("%w: unknown version", errLeaseCodec)
	}
	r := reader{b: v[1:]}
	*l = placement.Lease{ID: r.str(), State: placement.State(r.str()), GPU: r.str(), GPUIndex: r.int(), GPUName: r.str(),
		GPUTotalBytes: r.i64(), Bytes: r.i64(), Device: device.Spec{Kind: device.Kind(r.int()), Index: r.int(), UUID: r.str()},
		Priority: placement.Priority(r.int()), Holder: placement.Holder{PID: r.int(), UID: r.int(), Name: r.str(), StartTicks: r.uvarint()}}
	if n := r.count(); n > 0 {
		l.PIDs = make([]int, n)
		for i := range l.PIDs {
			l.PIDs[i] = r.int()
		}
	}
	l.TTL = time.Duration(r.i64())
	l.Created, l.Granted, l.Expires, l.Ended = r.time(), r.time(), r.time(), r.time()
	l.Reason, l.UsedBytes, l.PeakBytes = r.str(), r.i64(), r.i64()
	f := r.byte()
	l.Overrun, l.Reclaimable = f&1 != 0, f&2 != 0
	l.ReclaimableSince = r.time()
	if f&4 != 0 {
		l.EstimateKey = &estimator.Key{Backend: estimator.Backend(r.str()), Model: r.str(), Precision: r.str(),
			Beam: r.int(), Batch: r.int(), GPUModel: r.str(), Driver: r.str()}
	}
	if f&8 != 0 {
		n := r.count()
		l.Labels = make(map[string]string, n)
		for range n {
			k := r.str()
			l.Labels[k] = r.str()
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes left over", errLeaseCodec, len(r.b))
	}
	return r.err
}

// reader reads the binary form; the first error sticks and zero values
// follow it.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", errLeaseCodec, what)
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) i64() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int { return int(r.i64()) }

// count reads a length that the rest of the value can hold.
func (r *reader) count() int {
	n := r.i64()
	if n < 0 || n > int64(len(r.b)) {
		r.fail("count")
		return 0
	}
	return int(n)
}

func (r *reader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail("length")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes(r.uvarint())) }

func (r *reader) byte() byte {
	v := r.bytes(1)
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

func (r *reader) time() time.Time {
	v := r.bytes(uint64(r.byte()))
	var t time.Time
	if len(v) > 0 {
		if err := t.UnmarshalBinary(v); err != nil {
			r.fail("time")
		}
	}
	return t
}
