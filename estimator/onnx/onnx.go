// Package onnx reads what the memory estimator needs from an ONNX model file
// without loading it: the bytes of its initializers (weights), the graph's
// input and output names and the model's metadata_props. It walks the
// protobuf wire format itself, streaming: tensor payloads are seeked over,
// not read, so a 1 GB model costs a few reads and 64 KiB of buffer.
//
// Field numbers are onnx.proto's (onnx/onnx.proto, IR version 10).
package onnx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Sentinel errors; every error Read returns wraps one of them.
var (
	// ErrTruncated: the file ends inside a field.
	ErrTruncated = errors.New("onnx: truncated")
	// ErrInvalid: the bytes are not a well-formed ONNX model.
	ErrInvalid = errors.New("onnx: invalid")
)

// Model is what Read found in a model file.
type Model struct {
	IRVersion int64
	// Opset is the default ("" or "ai.onnx") domain's opset version.
	Opset int64
	// Inputs and Outputs are the main graph's input and output names,
	// initializers listed as inputs (IR < 4) excluded.
	Inputs, Outputs []string
	// Metadata is metadata_props.
	Metadata map[string]string
	// Initializers counts the tensors that hold weights: the initializers
	// and sparse initializers of every graph (subgraphs of If/Loop/Scan
	// included) and the tensors of Constant nodes.
	Initializers int
	// InitializerBytes is their size in memory once loaded: elements ×
	// element size by data type (sparse: values and indices), whatever
	// field stores them (raw_data, typed fields or external data).
	InitializerBytes int64
	// ExternalBytes is the part of InitializerBytes stored in external
	// data files next to the model.
	ExternalBytes int64
	// ExternalFiles names those files (relative to the model's directory).
	ExternalFiles []string
	// ByType is InitializerBytes by ONNX data type name ("float", "int8").
	ByType map[string]int64
	// FileBytes is the size of the model file.
	FileBytes int64
}

// maxDepth bounds nesting (graphs in attributes in nodes in graphs …).
const maxDepth = 32

// ReadFile reads path's model.
func ReadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	m, err := Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Read walks a ModelProto of size bytes from r. When r is an io.ReadSeeker
// (a file), tensor payloads are seeked over rather than read.
func Read(r io.Reader, size int64) (*Model, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: negative size", ErrInvalid)
	}
	w := &walker{r: bufio.NewReaderSize(r, 64<<10), m: &Model{Metadata: map[string]string{}, ByType: map[string]int64{}, FileBytes: size}, ext: map[string]bool{}}
	if s, ok := r.(io.ReadSeeker); ok {
		w.seek = s
	}
	if err := w.model(size); err != nil {
		return nil, err
	}
	if w.m.IRVersion <= 0 || !w.sawGraph {
		return nil, fmt.Errorf("%w: no ir_version or no graph: not an ONNX model", ErrInvalid)
	}
	return w.m, nil
}

// walker holds the reader and what has been found so far.
type walker struct {
	r        *bufio.Reader
	pos      int64         // bytes consumed
	seek     io.ReadSeeker // r, when it seeks: large payloads are skipped by seeking
	m        *Model
	depth    int
	sawGraph bool
	ext      map[string]bool
	inits    map[string]bool // main graph initializer names (to drop them from Inputs)
}

// model walks ModelProto's fields.
func (w *walker) model(n int64) error {
	return w.fields(n, func(num int32, typ wireType, n int64) error {
		switch {
		case num == 1 && typ == varintType:
			v, err := w.varint()
			w.m.IRVersion = int64(v)
			return err
		case num == 8 && typ == bytesType:
			return w.opset(n)
		case num == 7 && typ == bytesType:
			main := !w.sawGraph
			w.sawGraph = true
			return w.nested(func() error { return w.graph(n, main) })
		case num == 14 && typ == bytesType:
			k, v, err := w.stringPair(n)
			w.m.Metadata[k] = v
			return err
		}
		return w.skip(typ, n)
	})
}

func (w *walker) opset(n int64) error {
	var domain string
	var version int64
	err := w.fields(n, func(num int32, typ wireType, n int64) error {
		switch {
		case num == 1 && typ == bytesType:
			s, err := w.str(n)
			domain = s
			return err
		case num == 2 && typ == varintType:
			v, err := w.varint()
			version = int64(v)
			return err
		}
		return w.skip(typ, n)
	})
	if err == nil && (domain == "" || domain == "ai.onnx") {
		w.m.Opset = version
	}
	return err
}

// graph walks a GraphProto; main is the model's own graph (its inputs and
// outputs are recorded).
func (w *walker) graph(n int64, main bool) error {
	var inputs []string
	if main {
		w.inits = map[string]bool{}
	}
	err := w.fields(n, func(num int32, typ wireType, n int64) error {
		if typ != bytesType {
			return w.skip(typ, n)
		}
		switch num {
		case 1: // node
			return w.node(n)
		case 5: // initializer
			t, err := w.tensor(n)
			if err == nil {
				w.addInitializer(t)
				if main {
					w.inits[t.name] = true
				}
			}
			return err
		case 15: // sparse_initializer
			return w.sparse(n)
		case 11, 12: // input, output
			name, err := w.valueInfoName(n)
			if err == nil && main && num == 11 {
				inputs = append(inputs, name)
			} else if err == nil && main {
				w.m.Outputs = append(w.m.Outputs, name)
			}
			return err
		}
		return w.skip(typ, n)
	})
	for _, in := range inputs {
		if !w.inits[in] {
			w.m.Inputs = append(w.m.Inputs, in)
		}
	}
	return err
}

// node walks a NodeProto for its attributes: Constant's value and
// subgraphs hold weights too.
func (w *walker) node(n int64) error {
	return w.nested(func() error {
		return w.fields(n, func(num int32, typ wireType, n int64) error {
			if num == 5 && typ == bytesType {
				return w.attribute(n)
			}
			return w.skip(typ, n)
		})
	})
}

func (w *walker) attribute(n int64) error {
	return w.nested(func() error {
		return w.fields(n, func(num int32, typ wireType, n int64) error {
			if typ != bytesType {
				return w.skip(typ, n)
			}
			switch num {
			case 5, 10: // t, tensors
				t, err := w.tensor(n)
				if err == nil {
					w.addInitializer(t)
				}
				return err
			case 6, 11: // g, graphs
				return w.nested(func() error { return w.graph(n, false) })
			case 22, 23: // sparse_tensor, sparse_tensors
				return w.sparse(n)
			}
			return w.skip(typ, n)
		})
	})
}

// sparse walks a SparseTensorProto: values and indices are tensors.
func (w *walker) sparse(n int64) error {
	return w.nested(func() error {
		var ts []tensor
		err := w.fields(n, func(num int32, typ wireType, n int64) error {
			if (num == 1 || num == 2) && typ == bytesType {
				t, err := w.tensor(n)
				ts = append(ts, t)
				return err
			}
			return w.skip(typ, n)
		})
		if err != nil {
			return err
		}
		for _, t := range ts {
			w.addInitializer(t)
		}
		w.m.Initializers -= max(len(ts)-1, 0) // one sparse tensor, however many parts
		return nil
	})
}

func (w *walker) addInitializer(t tensor) {
	b := t.bytes()
	w.m.Initializers++
	w.m.InitializerBytes = satAdd(w.m.InitializerBytes, b)
	w.m.ByType[TypeName(t.dataType)] = satAdd(w.m.ByType[TypeName(t.dataType)], b)
	if t.external {
		w.m.ExternalBytes = satAdd(w.m.ExternalBytes, b)
		if t.location != "" && !w.ext[t.location] {
			w.ext[t.location] = true
			w.m.ExternalFiles = append(w.m.ExternalFiles, t.location)
		}
	}
}

// valueInfoName reads a ValueInfoProto's name.
func (w *walker) valueInfoName(n int64) (string, error) {
	var name string
	err := w.fields(n, func(num int32, typ wireType, n int64) error {
		if num == 1 && typ == bytesType {
			s, err := w.str(n)
			name = s
			return err
		}
		return w.skip(typ, n)
	})
	return name, err
}

// stringPair reads a StringStringEntryProto.
func (w *walker) stringPair(n int64) (key, value string, err error) {
	err = w.fields(n, func(num int32, typ wireType, n int64) error {
		switch {
		case num == 1 && typ == bytesType:
			s, err := w.str(n)
			key = s
			return err
		case num == 2 && typ == bytesType:
			s, err := w.str(n)
			value = s
			return err
		}
		return w.skip(typ, n)
	})
	return key, value, err
}

func (w *walker) nested(fn func() error) error {
	if w.depth >= maxDepth {
		return fmt.Errorf("%w: nested more than %d deep", ErrInvalid, maxDepth)
	}
	w.depth++
	defer func() { w.depth-- }()
	return fn()
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<62)-b {
		return 1 << 62
	}
	return a + b
}

func atoi(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}
