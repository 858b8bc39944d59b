// Package ggml reads whisper.cpp model files in the legacy ggml container
// (magic 0x67676d6c): hyper-parameters, mel filters, vocabulary and tensor
// headers. It never loads weights: it seeks past tensor data, so the exact
// weight bytes of a multi-gigabyte file are known after reading a few
// kilobytes.
package ggml

import "fmt"

// Type is a ggml tensor type (enum ggml_type in ggml.h).
type Type uint32

// ggml_type values, from ggml/include/ggml.h (ggml 0.27, as used by
// whisper.cpp 1.9.5). Gaps are types ggml removed (4, 5, 31-33, 36-38).
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	TypeNVFP4   Type = 40
	TypeQ1_0    Type = 41
)

// traits is one row of ggml.c's type_traits table: elements per block and
// bytes per block. Block sizes are the QK* constants and type sizes the
// sizeof(block_*) static_asserts of ggml/src/ggml-common.h.
type traits struct {
	name      string
	blockSize int64
	typeSize  int64
	quantized bool
}

// typeTraits returns the traits of t; ok is false for types ggml does not
// define (or removed).
func typeTraits(t Type) (traits, bool) {
	switch t {
	case TypeF32:
		return traits{"f32", 1, 4, false}, true
	case TypeF16:
		return traits{"f16", 1, 2, false}, true
	case TypeQ4_0:
		return traits{"q4_0", 32, 18, true}, true // d f16 + 16 nibbles
	case TypeQ4_1:
		return traits{"q4_1", 32, 20, true}, true // d, m f16 + 16 nibbles
	case TypeQ5_0:
		return traits{"q5_0", 32, 22, true}, true // d + qh[4] + 16
	case TypeQ5_1:
		return traits{"q5_1", 32, 24, true}, true // d, m + qh[4] + 16
	case TypeQ8_0:
		return traits{"q8_0", 32, 34, true}, true // d + 32 int8
	case TypeQ8_1:
		return traits{"q8_1", 32, 36, true}, true // d, s + 32 int8
	case TypeQ2_K:
		return traits{"q2_K", 256, 84, true}, true
	case TypeQ3_K:
		return traits{"q3_K", 256, 110, true}, true
	case TypeQ4_K:
		return traits{"q4_K", 256, 144, true}, true
	case TypeQ5_K:
		return traits{"q5_K", 256, 176, true}, true
	case TypeQ6_K:
		return traits{"q6_K", 256, 210, true}, true
	case TypeQ8_K:
		return traits{"q8_K", 256, 292, true}, true
	}
	return moreTraits(t)
}

// moreTraits covers the i-quants, integer, ternary and fp4 types.
func moreTraits(t Type) (traits, bool) {
	switch t {
	case TypeIQ2_XXS:
		return traits{"iq2_xxs", 256, 66, true}, true
	case TypeIQ2_XS:
		return traits{"iq2_xs", 256, 74, true}, true
	case TypeIQ3_XXS:
		return traits{"iq3_xxs", 256, 98, true}, true
	case TypeIQ1_S:
		return traits{"iq1_s", 256, 50, true}, true
	case TypeIQ4_NL:
		return traits{"iq4_nl", 32, 18, true}, true
	case TypeIQ3_S:
		return traits{"iq3_s", 256, 110, true}, true
	case TypeIQ2_S:
		return traits{"iq2_s", 256, 82, true}, true
	case TypeIQ4_XS:
		return traits{"iq4_xs", 256, 136, true}, true
	case TypeI8:
		return traits{"i8", 1, 1, false}, true
	case TypeI16:
		return traits{"i16", 1, 2, false}, true
	case TypeI32:
		return traits{"i32", 1, 4, false}, true
	case TypeI64:
		return traits{"i64", 1, 8, false}, true
	case TypeF64:
		return traits{"f64", 1, 8, false}, true
	case TypeIQ1_M:
		return traits{"iq1_m", 256, 56, true}, true
	case TypeBF16:
		return traits{"bf16", 1, 2, false}, true
	case TypeTQ1_0:
		return traits{"tq1_0", 256, 54, true}, true
	case TypeTQ2_0:
		return traits{"tq2_0", 256, 66, true}, true
	case TypeMXFP4:
		return traits{"mxfp4", 32, 17, true}, true
	case TypeNVFP4:
		return traits{"nvfp4", 64, 36, true}, true
	case TypeQ1_0:
		return traits{"q1_0", 128, 18, true}, true
	}
	return traits{}, false
}

// Known reports whether ggml defines t.
func (t Type) Known() bool { _, ok := typeTraits(t); return ok }

// String returns ggml's type name ("f16", "q5_0", …) or "type(N)".
func (t Type) String() string {
	if tr, ok := typeTraits(t); ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block (1 for plain types).
func (t Type) BlockSize() int64 { tr, _ := typeTraits(t); return tr.blockSize }

// TypeSize is the number of bytes of one block.
func (t Type) TypeSize() int64 { tr, _ := typeTraits(t); return tr.typeSize }

// Quantized reports whether t is a block-quantized type.
func (t Type) Quantized() bool { tr, _ := typeTraits(t); return tr.quantized }

// ParseType maps a ggml type name ("f16", "Q5_0", "bf16") to its Type.
func ParseType(name string) (Type, bool) {
	for t := Type(0); t <= TypeQ1_0; t++ {
		if tr, ok := typeTraits(t); ok && equalFold(tr.name, name) {
			return t, true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// FType is a ggml file type (enum ggml_ftype): which type the big matrices
// of a model use. whisper.cpp stores it as qntvr*1000 + ftype.
type FType int32

// weightTypes is ggml_ftype_to_ggml_type (ggml.c). FType 4 is
// MOSTLY_Q4_1_SOME_F16; 5 and 6 were removed.
var weightTypes = map[FType]Type{
	0: TypeF32, 1: TypeF16, 2: TypeQ4_0, 3: TypeQ4_1, 4: TypeQ4_1,
	7: TypeQ8_0, 8: TypeQ5_0, 9: TypeQ5_1, 10: TypeQ2_K, 11: TypeQ3_K,
	12: TypeQ4_K, 13: TypeQ5_K, 14: TypeQ6_K, 15: TypeIQ2_XXS,
	16: TypeIQ2_XS, 17: TypeIQ3_XXS, 18: TypeIQ1_S, 19: TypeIQ4_NL,
	20: TypeIQ3_S, 21: TypeIQ2_S, 22: TypeIQ4_XS, 23: TypeIQ1_M,
	24: TypeBF16, 25: TypeMXFP4, 26: TypeNVFP4, 27: TypeQ1_0,
}

// WeightType is the ggml type whisper.cpp uses for the model's matrices
// (wctx.wtype); ok is false where whisper.cpp rejects the file ("bad ftype").
func (f FType) WeightType() (Type, bool) {
	t, ok := weightTypes[f]
	return t, ok
}

// FTypeFor returns the file type whose weight type is t (the inverse of
// WeightType, preferring the plain MOSTLY_ value).
func FTypeFor(t Type) (FType, bool) {
	best, found := FType(0), false
	for f, wt := range weightTypes {
		if wt == t && f != 4 && (!found || f < best) {
			best, found = f, true
		}
	}
	return best, found
}

// MarshalText writes the type's name, so JSON shows "q5_0" rather than 6.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText accepts a name ParseType knows.
func (t *Type) UnmarshalText(b []byte) error {
	v, ok := ParseType(string(b))
	if !ok {
		return fmt.Errorf("ggml type %q: %w", b, ErrUnknownType)
	}
	*t = v
	return nil
}
