package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
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
// start-up. The first byte is the version, then the fields in the order of
// appendLease, integers as varints, strings and times length-prefixed;
// leaseV2 (written since issue 25) ends with the CRC-32C of everything
// before it, so a flipped bit in a stored value is found (and refused,
// naming the key) instead of decoded into another lease. leaseV1 (no
// checksum) and JSON (a value starting with '{') are what earlier versions
// stored: still read in journal records (whose own CRC covers them), and
// rewritten as leaseV2 when an earlier version's database is first opened
// (initLeases; formatKey then records leaseV2 and bbolt values must be
// leaseV2).
const (
	leaseV1 = 1
	leaseV2 = 2
	// leaseSum is the size of leaseV2's trailing CRC-32C.
	leaseSum = 4
)

// formatKey, in bucketMeta (with the commit sequence, epoch.go), is the
// stored form of the leases bucket: absent while it may hold JSON, leaseV1
// while it may hold values without a checksum, leaseV2 once every value
// has one.
var formatKey = []byte("leases_format")

// initLeases creates the leases bucket, or rewrites the leases of an
// earlier version (JSON or leaseV1) as leaseV2, once.
func initLeases(tx *bolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(bucketLeases)
	if err != nil {
		return err
	}
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	if f := meta.Get(formatKey); len(f) == 1 && f[0] == leaseV2 {
		return nil
	}
	rewrite := map[string][]byte{}
	err = b.ForEach(func(k, v []byte) error {
		var l placement.Lease
		if err := decodeLease(v, &l); err != nil {
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
	return meta.Put(formatKey, []byte{leaseV2})
}

var errLeaseCodec = errors.New("malformed stored lease")

// encodeLease appends l's stored form (leaseV2, checksummed) to b.
func encodeLease(b []byte, l *placement.Lease) []byte {
	at := len(b)
	b = appendLeaseBody(append(b, leaseV2), l)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[at:], crcTable))
}

// appendLeaseBody appends the fields of l (leaseV1's and leaseV2's body).
func appendLeaseBody(b []byte, l *placement.Lease) []byte {
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
	// leaseV2: the start times of the added PIDs (a reused PID is not
	// taken for the process that was added).
	b = putInts(b, int64(len(l.PIDStarts)))
	for _, pid := range slices.Sorted(maps.Keys(l.PIDStarts)) {
		b = putInts(b, int64(pid))
		b = binary.AppendUvarint(b, l.PIDStarts[pid])
	}
	// leaseV2's optional tail (issue 26, streams): the largest size a
	// resized lease had and its estimate key's part. Written only when
	// either is set, so a lease that was never resized keeps the form
	// earlier binaries read (they refuse bytes left over, never misread).
	part := ""
	if l.EstimateKey != nil {
		part = l.EstimateKey.Part
	}
	if l.MaxBytes != 0 || part != "" {
		b = putInts(b, l.MaxBytes)
		b = putStrings(b, part)
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

// errLeaseSum is a leaseV2 value whose checksum does not match.
var errLeaseSum = fmt.Errorf("%w: checksum mismatch", errLeaseCodec)

// decodeStored decodes a bbolt lease value under key: leaseV2 only (the
// format the bucket is in once opened), whose checksum must match and
// whose ID must be the key.
func decodeStored(key, v []byte, l *placement.Lease) error {
	if len(v) == 0 || v[0] != leaseV2 {
		return fmt.Errorf("%w: not a checksummed lease (version byte %#x)", errLeaseCodec, firstByte(v))
	}
	if err := decodeLease(v, l); err != nil {
		return err
	}
	if l.ID != string(key) {
		return fmt.Errorf("%w: the value is lease %q", errLeaseCodec, l.ID)
	}
	return nil
}

func firstByte(v []byte) byte {
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// decodeLease decodes a stored lease: leaseV2 (its checksum checked),
// leaseV1, or the JSON of earlier versions.
func decodeLease(v []byte, l *placement.Lease) error {
	if len(v) > 0 && v[0] == '{' {
		return json.Unmarshal(v, l)
	}
	if len(v) == 0 || (v[0] != leaseV1 && v[0] != leaseV2) {
		return fmt.Errorf("%w: unknown version", errLeaseCodec)
	}
	body := v[1:]
	if v[0] == leaseV2 {
		if len(v) < 1+leaseSum {
			return fmt.Errorf("%w: %d bytes", errLeaseCodec, len(v))
		}
		n := len(v) - leaseSum
		if crc32.Checksum(v[:n], crcTable) != binary.LittleEndian.Uint32(v[n:]) {
			return errLeaseSum
		}
		body = v[1:n]
	}
	return decodeBody(body, v[0], l)
}

// decodeBody decodes the fields appendLeaseBody wrote (leaseV1's lack the
// PID start times).
func decodeBody(body []byte, version byte, l *placement.Lease) error {
	r := reader{b: body}
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
	if version == leaseV2 {
		if n := r.count(); n > 0 {
			l.PIDStarts = make(map[int]uint64, n)
			for range n {
				pid := r.int()
				l.PIDStarts[pid] = r.uvarint()
			}
		}
		if len(r.b) != 0 && r.err == nil { // the optional tail
			l.MaxBytes = r.i64()
			switch part := r.str(); {
			case part == "" && l.MaxBytes == 0:
				r.fail("empty tail") // never written: a lease with nothing to add has none
			case part == "":
			case l.EstimateKey == nil:
				r.fail("estimate key part without a key")
			default:
				l.EstimateKey.Part = part
			}
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
