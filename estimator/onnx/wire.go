package onnx

import (
	"errors"
	"fmt"
	"io"
)

// wireType is a protobuf wire type.
type wireType uint8

// Wire types (groups, 3 and 4, are not used by onnx.proto and are refused).
const (
	varintType  wireType = 0
	fixed64Type wireType = 1
	bytesType   wireType = 2
	fixed32Type wireType = 5
)

// maxString bounds the names and metadata values read into memory.
const maxString = 1 << 20

// fields reads the fields of a message of n bytes at the reader's position.
// For each it calls fn with the field number, the wire type and, for
// length-delimited fields, the length; fn consumes the value (a bytes field
// it consumes only in part is skipped to its end).
func (w *walker) fields(n int64, fn func(num int32, typ wireType, n int64) error) error {
	end := w.pos + n
	for w.pos < end {
		tag, err := w.varint()
		if err != nil {
			return err
		}
		num, typ := int32(tag>>3), wireType(tag&7)
		if num <= 0 || tag>>3 > 1<<29-1 {
			return fmt.Errorf("%w: field number %d", ErrInvalid, tag>>3)
		}
		var length int64
		if typ == bytesType {
			l, err := w.varint()
			if err != nil {
				return err
			}
			if l > uint64(end-w.pos) {
				return fmt.Errorf("%w: field %d of %d bytes overruns its message", ErrInvalid, num, l)
			}
			length = int64(l)
		}
		start := w.pos
		if err := fn(num, typ, length); err != nil {
			return err
		}
		if typ == bytesType && w.pos < start+length {
			if err := w.discard(start + length - w.pos); err != nil {
				return err
			}
		}
		if w.pos > end || (typ == bytesType && w.pos != start+length) {
			return fmt.Errorf("%w: field %d overruns its message", ErrInvalid, num)
		}
	}
	return nil
}

// skip consumes a field's value.
func (w *walker) skip(typ wireType, n int64) error {
	switch typ {
	case varintType:
		_, err := w.varint()
		return err
	case fixed64Type:
		return w.discard(8)
	case fixed32Type:
		return w.discard(4)
	case bytesType:
		return w.discard(n)
	}
	return fmt.Errorf("%w: wire type %d", ErrInvalid, typ)
}

func (w *walker) varint() (uint64, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b, err := w.r.ReadByte()
		if err != nil {
			return 0, truncated(err)
		}
		w.pos++
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w: varint longer than 10 bytes", ErrInvalid)
}

// seekOver is the least skip that seeks instead of reading through.
const seekOver = 64 << 10

func (w *walker) discard(n int64) error {
	if w.seek != nil && n > int64(w.r.Buffered())+seekOver {
		// Tensor payloads: seek over them. Lengths were checked against
		// their message (and the file) before, so this stays in the file.
		b := w.r.Buffered()
		_, _ = w.r.Discard(b)
		w.pos, n = w.pos+int64(b), n-int64(b)
		if _, err := w.seek.Seek(n, io.SeekCurrent); err != nil {
			return fmt.Errorf("onnx: seek: %w", err)
		}
		w.r.Reset(w.seek)
		w.pos += n
		return nil
	}
	for n > 0 {
		k := int(min(n, 1<<30))
		d, err := w.r.Discard(k)
		w.pos += int64(d)
		n -= int64(d)
		if err != nil {
			return truncated(err)
		}
	}
	return nil
}

func (w *walker) str(n int64) (string, error) {
	if n > maxString {
		return "", fmt.Errorf("%w: a %d-byte string", ErrInvalid, n)
	}
	b := make([]byte, n)
	k, err := io.ReadFull(w.r, b)
	w.pos += int64(k)
	if err != nil {
		return "", truncated(err)
	}
	return string(b), nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return ErrTruncated
	}
	return fmt.Errorf("onnx: read: %w", err)
}
