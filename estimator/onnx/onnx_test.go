package onnx_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wsched/wsched/estimator/onnx"
	"github.com/wsched/wsched/estimator/onnx/onnxtest"
)

func TestReadSenseVoice(t *testing.T) {
	path, err := onnxtest.WriteSenseVoice(t.TempDir(), onnxtest.SenseVoiceOptions{Vocab: 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(560*64*4 + 6*8); m.InitializerBytes != want || m.Initializers != 2 || m.ByType["float"] != 560*64*4 || m.ByType["int64"] != 48 {
		t.Errorf("initializers %d (%d bytes, %v), want 2 (%d bytes)", m.Initializers, m.InitializerBytes, m.ByType, want)
	}
	if !slices.Equal(m.Inputs, []string{"x", "x_length", "language", "text_norm"}) || !slices.Equal(m.Outputs, []string{"logits"}) {
		t.Errorf("inputs %v outputs %v", m.Inputs, m.Outputs)
	}
	if m.IRVersion != 8 || m.Opset != 13 || m.Metadata["vocab_size"] != "64" || m.Metadata["lang_yue"] != "7" || m.ExternalBytes != 0 {
		t.Errorf("model %+v", m)
	}
}

// storageModel holds one tensor in each way ONNX stores weights.
func storageModel() onnxtest.Model {
	f := onnxtest.Floats(make([]float32, 6))
	sub := onnxtest.Graph{Name: "then", Initializers: []onnxtest.Tensor{{Name: "s", DataType: onnxtest.Float, Dims: []int64{5}, Raw: onnxtest.Floats(make([]float32, 5))}}}
	return onnxtest.Model{IRVersion: 9, Opset: 17, Metadata: [][2]string{{"k", "v"}}, Graph: onnxtest.Graph{
		Nodes: []onnxtest.Node{
			{Op: "Constant", Output: []string{"c"}, Tensors: map[string]onnxtest.Tensor{"value": {Name: "c", DataType: onnxtest.Int64, Dims: []int64{3}, Raw: onnxtest.Int64s(1, 2, 3), Typed: true}}},
			{Op: "If", Inputs: []string{"cond"}, Output: []string{"y"}, Graphs: map[string]onnxtest.Graph{"then_branch": sub}},
		},
		Initializers: []onnxtest.Tensor{
			{Name: "raw", DataType: onnxtest.Float, Dims: []int64{2, 3}, Raw: f},
			{Name: "typed", DataType: onnxtest.Float, Dims: []int64{2, 3}, Raw: f, Typed: true},
			{Name: "typed32", DataType: onnxtest.Int32, Dims: []int64{4}, Raw: make([]byte, 16), Typed: true},
			{Name: "ext", DataType: onnxtest.Float, Dims: []int64{1000, 1000}, External: "weights.bin", ExternalLength: 4_000_000},
			{Name: "ext2", DataType: 10, Dims: []int64{10}, External: "weights.bin", ExternalLength: -1}, // float16, length by dims
			{Name: "int4", DataType: 22, Dims: []int64{3}, Raw: []byte{0, 0}},
			{Name: "scalar", DataType: onnxtest.Int64, Raw: onnxtest.Int64s(7)},
		},
		Inputs:  []onnxtest.Value{{Name: "cond", ElemType: 9}, {Name: "raw", ElemType: onnxtest.Float, Dims: []any{2, 3}}},
		Outputs: []onnxtest.Value{{Name: "y", ElemType: onnxtest.Float, Dims: []any{"n"}}},
	}}
}

func TestReadStorageForms(t *testing.T) {
	data := storageModel().Bytes()
	m, err := onnx.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	// raw 24 + typed 24 + typed32 16 + ext 4e6 + ext2 20 + int4 2 + scalar 8 + Constant 24 + subgraph 20
	want := int64(24 + 24 + 16 + 4_000_000 + 20 + 2 + 8 + 24 + 20)
	if m.InitializerBytes != want || m.Initializers != 9 {
		t.Errorf("%d initializers, %d bytes; want 9, %d (%v)", m.Initializers, m.InitializerBytes, want, m.ByType)
	}
	if m.ExternalBytes != 4_000_020 || !slices.Equal(m.ExternalFiles, []string{"weights.bin"}) {
		t.Errorf("external %d bytes in %v", m.ExternalBytes, m.ExternalFiles)
	}
	if !slices.Equal(m.Inputs, []string{"cond"}) || m.Metadata["k"] != "v" || m.Opset != 17 || m.FileBytes != int64(len(data)) {
		t.Errorf("inputs %v (initializer inputs left out), metadata %v, opset %d", m.Inputs, m.Metadata, m.Opset)
	}
}

func TestReadErrors(t *testing.T) {
	good := storageModel().Bytes()
	for _, tt := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, onnx.ErrInvalid},
		{"text", []byte("not a model at all"), onnx.ErrInvalid},
		{"cut short", good[:len(good)/2], onnx.ErrInvalid}, // a field runs past the end
		{"no graph", []byte{0x08, 0x08}, onnx.ErrInvalid},
		{"group wire type", []byte{0x0b}, onnx.ErrInvalid},
		{"overlong varint", bytes.Repeat([]byte{0xff}, 11), onnx.ErrInvalid},
	} {
		_, err := onnx.Read(bytes.NewReader(tt.data), int64(len(tt.data)))
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := onnx.Read(bytes.NewReader(good[:len(good)/2]), int64(len(good))); !errors.Is(err, onnx.ErrTruncated) {
		t.Errorf("file shorter than its size: %v, want ErrTruncated", err)
	}
	if _, err := onnx.ReadFile(filepath.Join(t.TempDir(), "missing.onnx")); err == nil {
		t.Error("missing file: no error")
	}
}

// deep nests If nodes n deep.
func deep(n int) []byte {
	g := onnxtest.Graph{}
	for range n {
		g = onnxtest.Graph{Nodes: []onnxtest.Node{{Op: "If", Graphs: map[string]onnxtest.Graph{"then_branch": g}}}}
	}
	return onnxtest.Model{IRVersion: 8, Opset: 13, Graph: g}.Bytes()
}

func TestReadNestingBounded(t *testing.T) {
	data := deep(100)
	if _, err := onnx.Read(bytes.NewReader(data), int64(len(data))); !errors.Is(err, onnx.ErrInvalid) {
		t.Errorf("100 nested graphs: %v, want ErrInvalid", err)
	}
	data = deep(5)
	if _, err := onnx.Read(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Errorf("5 nested graphs: %v", err)
	}
}

// FuzzRead feeds arbitrary bytes to Read: it must never panic, every error
// wraps a sentinel, and what it accepts is self-consistent. The kept corpus
// is in testdata/fuzz/FuzzRead.
func FuzzRead(f *testing.F) {
	f.Add(storageModel().Bytes())
	f.Add(deep(3))
	f.Add(onnxtest.Model{IRVersion: 8, Opset: 13, Graph: onnxtest.Graph{Initializers: []onnxtest.Tensor{{Name: "w", DataType: onnxtest.Float, Dims: []int64{1 << 40, 1 << 40}}}}}.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := onnx.Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, onnx.ErrInvalid) && !errors.Is(err, onnx.ErrTruncated) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		var sum int64
		for _, b := range m.ByType {
			sum += b
		}
		if m.InitializerBytes < 0 || m.ExternalBytes < 0 || m.ExternalBytes > m.InitializerBytes || m.Initializers < 0 || m.IRVersion <= 0 {
			t.Fatalf("inconsistent: %+v", m)
		}
		if sum < m.InitializerBytes && m.InitializerBytes < 1<<62 {
			t.Fatalf("by type %d < total %d", sum, m.InitializerBytes)
		}
	})
}

// countingFile counts the bytes read through it.
type countingFile struct {
	*os.File
	read int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	c.read += int64(n)
	return n, err
}

// TestReadSeeksOverWeights: reading a file's header reads a small part of
// it (tensor payloads are seeked over), with the same result as reading it
// all through.
func TestReadSeeksOverWeights(t *testing.T) {
	path, err := onnxtest.WriteSenseVoice(t.TempDir(), onnxtest.SenseVoiceOptions{Vocab: 4096}) // 9 MB of weights
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	cf := &countingFile{File: f}
	seeked, err := onnx.Read(cf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	streamed, err := onnx.Read(bytes.NewBuffer(data), int64(len(data))) // no Seek: reads through
	if err != nil {
		t.Fatal(err)
	}
	if cf.read > 1<<20 || seeked.InitializerBytes != streamed.InitializerBytes || seeked.InitializerBytes != 560*4096*4+48 {
		t.Errorf("read %d of %d bytes; initializers %d seeking, %d streaming", cf.read, st.Size(), seeked.InitializerBytes, streamed.InitializerBytes)
	}
	if !slices.Equal(seeked.Inputs, streamed.Inputs) || seeked.Metadata["vocab_size"] != "4096" {
		t.Errorf("seeking read %v / %v", seeked.Inputs, seeked.Metadata["vocab_size"])
	}
	t.Logf("read %d of %d bytes", cf.read, st.Size())
}
