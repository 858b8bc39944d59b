package ggml

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzRead feeds arbitrary bytes to Read: it must never panic, and whatever
// it accepts must be self-consistent. The kept corpus is in
// testdata/fuzz/FuzzRead; seeds below add well-formed models.
func FuzzRead(f *testing.F) {
	f.Add(wholeModel(tinyHParams(1)))
	f.Add(wholeModel(tinyHParams(8)))
	f.Add((&fileWriter{}).header(tinyHParams(1), 8, 9, []string{"x", "yy"}).Bytes())
	f.Add((&fileWriter{}).header(tinyHParams(2), 0, 0, nil).tensor("w", TypeQ4_0, []int64{32, 2}, -1).Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrBadMagic) && !errors.Is(err, ErrTruncated) &&
				!errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if m.WeightBytes < 0 || m.FileBytes != int64(len(data)) {
			t.Fatalf("WeightBytes %d FileBytes %d", m.WeightBytes, m.FileBytes)
		}
		var sum int64
		for _, tn := range m.Tensors {
			if tn.Offset < 0 || tn.Bytes < 0 || tn.Offset+tn.Bytes > int64(len(data)) {
				t.Fatalf("tensor %q [%d, +%d) outside a %d-byte file", tn.Name, tn.Offset, tn.Bytes, len(data))
			}
			sum += tn.Bytes
		}
		if !m.Empty && sum != m.WeightBytes {
			t.Fatalf("sum %d != WeightBytes %d", sum, m.WeightBytes)
		}
		_ = m.CheckWhisper()
	})
}
