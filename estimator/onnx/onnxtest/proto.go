// Package onnxtest writes ONNX model files for tests: a small protobuf
// writer for ModelProto and its parts (field numbers from onnx.proto), and
// WriteSenseVoice, WriteParaformer, WriteWhisper and WriteSileroVAD: models with tiny
// random weights and the real interfaces, which sherpa-onnx loads and runs
// like the real ones.
package onnxtest

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// ONNX data types used here.
const (
	Float = 1
	Int32 = 6
	Int64 = 7
)

// Tensor is a TensorProto with its data as raw_data, or, with External set,
// in an external file.
type Tensor struct {
	Name     string
	DataType int
	Dims     []int64
	Raw      []byte
	// Typed stores Raw's values in float_data / int32_data / int64_data
	// instead of raw_data (Float, Int32 or Int64 only).
	Typed bool
	// External: data_location EXTERNAL, location and length; Raw unused.
	External       string
	ExternalLength int64
}

// Bytes encodes t as a TensorProto.
func (t Tensor) Bytes() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType) // dims, packed
	var dims []byte
	for _, d := range t.Dims {
		dims = protowire.AppendVarint(dims, uint64(d))
	}
	b = protowire.AppendBytes(b, dims)
	b = appendVarint(b, 2, uint64(t.DataType))
	b = appendString(b, 8, t.Name)
	switch {
	case t.External != "":
		b = appendBytes(b, 13, stringPair("location", t.External))
		b = appendBytes(b, 13, stringPair("length", strconv.FormatInt(t.ExternalLength, 10)))
		b = appendVarint(b, 14, 1)
	case t.Typed:
		b = append(b, t.typed()...)
	default:
		b = appendBytes(b, 9, t.Raw)
	}
	return b
}

// typed encodes Raw (little-endian values) in the typed field.
func (t Tensor) typed() []byte {
	var packed []byte
	field := protowire.Number(4)
	switch t.DataType {
	case Float:
		packed = t.Raw // float_data is packed fixed32: the same bytes
	case Int32:
		field = 5
		for i := 0; i+4 <= len(t.Raw); i += 4 {
			packed = protowire.AppendVarint(packed, uint64(int64(int32(binary.LittleEndian.Uint32(t.Raw[i:])))))
		}
	case Int64:
		field = 7
		for i := 0; i+8 <= len(t.Raw); i += 8 {
			packed = protowire.AppendVarint(packed, binary.LittleEndian.Uint64(t.Raw[i:]))
		}
	}
	return appendBytes(nil, field, packed)
}

// Floats is the raw little-endian form of v.
func Floats(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// Int64s is the raw little-endian form of v.
func Int64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

// Value is a graph input or output: a tensor of ElemType whose dimensions
// are numbers (int64) or symbolic names (string).
type Value struct {
	Name     string
	ElemType int
	Dims     []any
}

// Bytes encodes v as a ValueInfoProto.
func (v Value) Bytes() []byte {
	var shape []byte
	for _, d := range v.Dims {
		var dim []byte
		switch d := d.(type) {
		case int64:
			dim = appendVarint(nil, 1, uint64(d))
		case int:
			dim = appendVarint(nil, 1, uint64(d))
		case string:
			dim = appendString(nil, 2, d)
		}
		shape = appendBytes(shape, 1, dim)
	}
	tensorType := appendVarint(nil, 1, uint64(v.ElemType))
	tensorType = appendBytes(tensorType, 2, shape)
	typ := appendBytes(nil, 1, tensorType)
	b := appendString(nil, 1, v.Name)
	return appendBytes(b, 2, typ)
}

// Node is a NodeProto; Tensors are tensor attributes (Constant's value).
type Node struct {
	Op             string
	Inputs, Output []string
	Ints           map[string]int64
	Tensors        map[string]Tensor
	Graphs         map[string]Graph
}

// Bytes encodes n as a NodeProto.
func (n Node) Bytes() []byte {
	var b []byte
	for _, in := range n.Inputs {
		b = appendString(b, 1, in)
	}
	for _, out := range n.Output {
		b = appendString(b, 2, out)
	}
	b = appendString(b, 4, n.Op)
	for _, name := range slices.Sorted(maps.Keys(n.Ints)) {
		v := n.Ints[name]
		a := appendString(nil, 1, name)
		a = appendVarint(a, 3, uint64(v))
		a = appendVarint(a, 20, 2) // INT
		b = appendBytes(b, 5, a)
	}
	for _, name := range slices.Sorted(maps.Keys(n.Tensors)) {
		t := n.Tensors[name]
		a := appendString(nil, 1, name)
		a = appendBytes(a, 5, t.Bytes())
		a = appendVarint(a, 20, 4) // TENSOR
		b = appendBytes(b, 5, a)
	}
	for _, name := range slices.Sorted(maps.Keys(n.Graphs)) {
		g := n.Graphs[name]
		a := appendString(nil, 1, name)
		a = appendBytes(a, 6, g.Bytes())
		a = appendVarint(a, 20, 5) // GRAPH
		b = appendBytes(b, 5, a)
	}
	return b
}

// Graph is a GraphProto.
type Graph struct {
	Name            string
	Nodes           []Node
	Initializers    []Tensor
	Inputs, Outputs []Value
}

// Bytes encodes g as a GraphProto.
func (g Graph) Bytes() []byte {
	var b []byte
	for _, n := range g.Nodes {
		b = appendBytes(b, 1, n.Bytes())
	}
	b = appendString(b, 2, g.Name)
	for _, t := range g.Initializers {
		b = appendBytes(b, 5, t.Bytes())
	}
	for _, v := range g.Inputs {
		b = appendBytes(b, 11, v.Bytes())
	}
	for _, v := range g.Outputs {
		b = appendBytes(b, 12, v.Bytes())
	}
	return b
}

// Model is a ModelProto.
type Model struct {
	IRVersion int64
	Opset     int64
	Graph     Graph
	Metadata  [][2]string // key, value
}

// Bytes encodes m as a ModelProto.
func (m Model) Bytes() []byte {
	b := appendVarint(nil, 1, uint64(m.IRVersion))
	b = appendString(b, 2, "wsched-onnxtest")
	b = appendBytes(b, 7, m.Graph.Bytes())
	opset := appendString(nil, 1, "")
	opset = appendVarint(opset, 2, uint64(m.Opset))
	b = appendBytes(b, 8, opset)
	for _, kv := range m.Metadata {
		b = appendBytes(b, 14, stringPair(kv[0], kv[1]))
	}
	return b
}

func stringPair(k, v string) []byte { return appendString(appendString(nil, 1, k), 2, v) }

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}
