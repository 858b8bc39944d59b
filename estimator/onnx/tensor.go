package onnx

import (
	"fmt"
	"math/bits"
)

// tensor is what the walker keeps of a TensorProto.
type tensor struct {
	name     string
	dataType int64
	dims     []int64
	stored   int64 // payload bytes in the file: raw_data or the typed field
	strings  int64 // string_data bytes
	external bool  // data_location EXTERNAL
	location string
	extLen   int64 // external_data "length"; -1 when absent
}

// TensorProto field numbers.
const (
	tDims         = 1
	tDataType     = 2
	tFloatData    = 4
	tInt32Data    = 5
	tStringData   = 6
	tInt64Data    = 7
	tName         = 8
	tRawData      = 9
	tDoubleData   = 10
	tUint64Data   = 11
	tExternalData = 13
	tDataLocation = 14
)

// maxDims bounds a tensor's rank.
const maxDims = 64

func (w *walker) tensor(n int64) (tensor, error) {
	t := tensor{extLen: -1}
	err := w.nested(func() error {
		return w.fields(n, func(num int32, typ wireType, n int64) error { return w.tensorField(&t, num, typ, n) })
	})
	return t, err
}

func (w *walker) tensorField(t *tensor, num int32, typ wireType, n int64) error {
	switch {
	case num == tDims && typ == varintType:
		v, err := w.varint()
		t.dims = append(t.dims, int64(v))
		return w.checkRank(t, err)
	case num == tDims && typ == bytesType: // packed
		err := w.packedVarints(n, func(v uint64) {
			if len(t.dims) <= maxDims {
				t.dims = append(t.dims, int64(v))
			}
		})
		return w.checkRank(t, err)
	case num == tDataType && typ == varintType:
		v, err := w.varint()
		t.dataType = int64(v)
		return err
	case num == tName && typ == bytesType:
		s, err := w.str(n)
		t.name = s
		return err
	case num == tStringData && typ == bytesType:
		t.strings += n
	case typ == bytesType && (num == tRawData || num == tFloatData || num == tInt32Data || num == tInt64Data || num == tDoubleData || num == tUint64Data):
		t.stored += n
	case typ != bytesType && (num == tFloatData || num == tInt32Data || num == tInt64Data || num == tDoubleData || num == tUint64Data):
		t.stored += 8 // one unpacked element; bytes() goes by dims anyway
	case num == tExternalData && typ == bytesType:
		k, v, err := w.stringPair(n)
		switch k {
		case "location":
			t.location = v
		case "length":
			if l, ok := atoi(v); ok {
				t.extLen = l
			}
		}
		return err
	case num == tDataLocation && typ == varintType:
		v, err := w.varint()
		t.external = v == 1
		return err
	}
	return w.skip(typ, n)
}

func (w *walker) checkRank(t *tensor, err error) error {
	if err == nil && len(t.dims) > maxDims {
		return fmt.Errorf("%w: tensor %q has more than %d dimensions", ErrInvalid, t.name, maxDims)
	}
	return err
}

// packedVarints reads n bytes of packed varints.
func (w *walker) packedVarints(n int64, fn func(uint64)) error {
	end := w.pos + n
	for w.pos < end {
		v, err := w.varint()
		if err != nil {
			return err
		}
		fn(v)
	}
	if w.pos != end {
		return fmt.Errorf("%w: packed field overruns", ErrInvalid)
	}
	return nil
}

// elements is the product of dims, saturating; a scalar has one.
func (t tensor) elements() int64 {
	e := uint64(1)
	for _, d := range t.dims {
		if d < 0 {
			return 0
		}
		hi, lo := bits.Mul64(e, uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 1 << 62
		}
		e = lo
	}
	return int64(e)
}

// bytes is the tensor's size in memory once loaded.
func (t tensor) bytes() int64 {
	if t.dataType == typeString {
		return t.strings
	}
	if t.external && t.extLen >= 0 {
		return t.extLen
	}
	bitsPer := elementBits(t.dataType)
	if bitsPer == 0 { // unknown type: what the file stores
		return t.stored
	}
	e := t.elements()
	if e > (1<<62)/bitsPer {
		return 1 << 62
	}
	return (e*bitsPer + 7) / 8
}

// ONNX TensorProto.DataType values.
const typeString = 8

var typeInfo = map[int64]struct {
	name string
	bits int64
}{
	1: {"float", 32}, 2: {"uint8", 8}, 3: {"int8", 8}, 4: {"uint16", 16}, 5: {"int16", 16},
	6: {"int32", 32}, 7: {"int64", 64}, 8: {"string", 0}, 9: {"bool", 8}, 10: {"float16", 16},
	11: {"double", 64}, 12: {"uint32", 32}, 13: {"uint64", 64}, 14: {"complex64", 64},
	15: {"complex128", 128}, 16: {"bfloat16", 16}, 17: {"float8e4m3fn", 8}, 18: {"float8e4m3fnuz", 8},
	19: {"float8e5m2", 8}, 20: {"float8e5m2fnuz", 8}, 21: {"uint4", 4}, 22: {"int4", 4}, 23: {"float4e2m1", 4},
}

func elementBits(dt int64) int64 { return typeInfo[dt].bits }

// TypeName is an ONNX data type's name ("float", "int8"); "type N" for
// one this package does not know.
func TypeName(dt int64) string {
	if ti, ok := typeInfo[dt]; ok {
		return ti.name
	}
	return fmt.Sprintf("type %d", dt)
}
