package ggml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

const testModels = "../../../shared/models/whisper-empty"

// TestForTestsModelsMatchWhisperCpp compares the size read from each
// for-tests model with the "CPU total size" whisper.cpp 1.9.5 logs when it
// loads the same file (MB = 10^6 bytes, printed with %8.2f).
func TestForTestsModelsMatchWhisperCpp(t *testing.T) {
	cases := []struct {
		file   string
		family string
		wantMB float64
	}{
		{"for-tests-ggml-tiny.bin", "tiny", 77.11},
		{"for-tests-ggml-tiny.en.bin", "tiny", 77.11},
		{"for-tests-ggml-base.bin", "base", 147.37},
		{"for-tests-ggml-base.en.bin", "base", 147.37},
		{"for-tests-ggml-small.bin", "small", 487.01},
		{"for-tests-ggml-small.en.bin", "small", 487.00},
		{"for-tests-ggml-medium.bin", "medium", 1533.14},
		{"for-tests-ggml-medium.en.bin", "medium", 1533.14},
		{"for-tests-ggml-large.bin", "large", 3093.99},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join(testModels, c.file)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("model file not available: %v", err)
			}
			m, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Empty || len(m.Tensors) != 0 {
				t.Fatalf("Empty=%v tensors=%d, want an empty test model", m.Empty, len(m.Tensors))
			}
			if got := m.Family(); got != c.family {
				t.Errorf("Family() = %q, want %q", got, c.family)
			}
			gotMB := float64(m.WeightBytes) / 1e6
			if rel := math.Abs(gotMB-c.wantMB) / c.wantMB; rel > 0.001 {
				t.Errorf("weights %.2f MB, whisper.cpp prints %.2f MB (off by %.3f%%)", gotMB, c.wantMB, rel*100)
			}
			if printed := fmt.Sprintf("%8.2f", gotMB); printed != fmt.Sprintf("%8.2f", c.wantMB) {
				t.Errorf("printed as whisper.cpp would: %s, want %8.2f", printed, c.wantMB)
			}
			if m.VocabSize != 50257 || m.MelBands != 80 || m.MelFFTBins != 201 {
				t.Errorf("vocab %d mel %dx%d", m.VocabSize, m.MelBands, m.MelFFTBins)
			}
			if m.WeightType() != TypeF16 {
				t.Errorf("weight type %v, want f16", m.WeightType())
			}
		})
	}
}

// TestWalkRealTensorHeaders reads complete synthetic models of several weight
// types and checks the walk against the writer's own layout.
func TestWalkRealTensorHeaders(t *testing.T) {
	for _, ft := range []FType{0, 1, 2, 3, 7, 8, 9, 12, 14, 24} {
		wt, _ := ft.WeightType()
		t.Run(wt.String(), func(t *testing.T) {
			h := tinyHParams(ft)
			if wt.BlockSize() == 256 {
				h.NAudioState, h.NTextState = 256, 256 // k-quants need rows of 256
			}
			data := wholeModel(h)
			m, err := Read(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			exp, _ := ExpectedTensors(h)
			if m.Empty || len(m.Tensors) != len(exp) {
				t.Fatalf("Empty=%v, %d tensors, want %d", m.Empty, len(m.Tensors), len(exp))
			}
			var sum int64
			for i, tn := range m.Tensors {
				if tn.Name != exp[i].Name || tn.Type != exp[i].Type || tn.Bytes != exp[i].Bytes {
					t.Errorf("tensor %d = %s %v %d, want %s %v %d", i, tn.Name, tn.Type, tn.Bytes, exp[i].Name, exp[i].Type, exp[i].Bytes)
				}
				if data[tn.Offset] != 0xA5 || data[tn.Offset+tn.Bytes-1] != 0xA5 {
					t.Errorf("tensor %s offset %d does not point at its data", tn.Name, tn.Offset)
				}
				sum += tn.Bytes
			}
			var byType int64
			for _, n := range m.BytesByType {
				byType += n
			}
			if m.WeightBytes != sum || byType != sum || m.BytesByType[wt] == 0 {
				t.Errorf("WeightBytes %d, by type %v, sum %d", m.WeightBytes, m.BytesByType, sum)
			}
			if err := m.CheckWhisper(); err != nil {
				t.Errorf("CheckWhisper: %v", err)
			}
			if m.VocabSize != 4 || m.MelFFTBins != 9 {
				t.Errorf("vocab %d fft %d", m.VocabSize, m.MelFFTBins)
			}
		})
	}
}

func TestTypeSizes(t *testing.T) {
	cases := []struct {
		typ  Type
		dims []int64
		want int64
	}{
		{TypeF32, []int64{3, 5}, 60},
		{TypeF16, []int64{384, 51865}, 384 * 51865 * 2},
		{TypeBF16, []int64{7}, 14},
		{TypeQ4_0, []int64{64, 2}, 2 * 2 * 18},
		{TypeQ4_1, []int64{32}, 20},
		{TypeQ5_0, []int64{32, 3}, 66},
		{TypeQ5_1, []int64{96}, 72},
		{TypeQ8_0, []int64{1280, 1280}, 1280 / 32 * 34 * 1280},
		{TypeQ2_K, []int64{256}, 84},
		{TypeQ3_K, []int64{512}, 220},
		{TypeQ4_K, []int64{256, 2}, 288},
		{TypeQ5_K, []int64{256}, 176},
		{TypeQ6_K, []int64{256}, 210},
		{TypeIQ4_NL, []int64{32}, 18},
		{TypeMXFP4, []int64{32}, 17},
	}
	for _, c := range cases {
		got, err := TensorBytes(c.typ, c.dims)
		if err != nil || got != c.want {
			t.Errorf("TensorBytes(%v, %v) = %d, %v; want %d", c.typ, c.dims, got, err, c.want)
		}
	}
	if _, err := TensorBytes(TypeQ4_0, []int64{33}); !errors.Is(err, ErrInvalid) {
		t.Errorf("ne0 not a block multiple: %v", err)
	}
	if _, err := TensorBytes(TypeF32, []int64{1 << 30, 1 << 30, 1 << 30, 1 << 30}); !errors.Is(err, ErrInvalid) {
		t.Errorf("overflow not caught: %v", err)
	}
	if tp, ok := ParseType("Q5_1"); !ok || tp != TypeQ5_1 {
		t.Errorf("ParseType(Q5_1) = %v %v", tp, ok)
	}
	if ft, ok := FTypeFor(TypeQ5_0); !ok || ft != 8 {
		t.Errorf("FTypeFor(q5_0) = %v %v", ft, ok)
	}
}

// TestTruncatedEverywhere cuts a complete model at every offset of its
// headers and around every tensor boundary (and at a stride in between):
// each prefix is either a valid model (cut exactly after the vocabulary or a
// tensor) or fails with ErrTruncated.
func TestTruncatedEverywhere(t *testing.T) {
	data := wholeModel(tinyHParams(8))
	full, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int]bool{int(headerEnd(t, data)): true}
	cuts := map[int]bool{}
	for n := 0; n < 2048; n++ {
		cuts[n] = true
	}
	for _, tn := range full.Tensors {
		end := int(tn.Offset + tn.Bytes)
		ends[end] = true
		for d := -80; d <= 16; d++ {
			cuts[end+d] = true
		}
	}
	for n := 0; n < len(data); n += 97 {
		cuts[n] = true
	}
	for n := range cuts {
		if n < 0 || n >= len(data) {
			continue
		}
		m, err := Read(bytes.NewReader(data[:n]), int64(n))
		switch {
		case err == nil:
			if !ends[n] {
				t.Fatalf("prefix %d parsed without error (%d tensors)", n, len(m.Tensors))
			}
		case !errors.Is(err, ErrTruncated):
			t.Fatalf("prefix %d: %v, want ErrTruncated", n, err)
		}
	}
}

func headerEnd(t *testing.T, data []byte) int64 {
	t.Helper()
	full, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(full.Tensors) == 0 {
		t.Fatal("need a model with tensors")
	}
	first := full.Tensors[0]
	return first.Offset - int64(12+4*len(first.Dims)+len(first.Name))
}

// TestHostileFields writes files whose length fields lie and checks each is
// refused with a wrapped sentinel error that names the offset.
func TestHostileFields(t *testing.T) {
	h := tinyHParams(1)
	base := func() *fileWriter { return (&fileWriter{}).header(h, 8, 9, []string{"x"}) }
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"bad magic", (&fileWriter{}).u32(0x46554747).i32(1, 2, 3).Bytes(), ErrBadMagic},
		{"empty", nil, ErrTruncated},
		{"negative vocab hparam", (&fileWriter{}).header(HParams{NVocab: -1}, 0, 0, nil).Bytes(), ErrInvalid},
		{"bad ftype", (&fileWriter{}).header(tinyHParams(5), 0, 0, nil).Bytes(), ErrInvalid},
		{"huge mel", (&fileWriter{}).u32(Magic).i32(40, 16, 64, 2, 2, 8, 64, 2, 2, 8, 1, 1<<30, 1<<30).Bytes(), ErrInvalid},
		{"mel data missing", (&fileWriter{}).u32(Magic).i32(40, 16, 64, 2, 2, 8, 64, 2, 2, 8, 1, 80, 201).Bytes(), ErrTruncated},
		{"cut in vocab count", (&fileWriter{}).header(h, 0, 0, nil).Bytes()[:58:58], ErrTruncated},
		{"vocab count lies", append((&fileWriter{}).u32(Magic).i32(40, 16, 64, 2, 2, 8, 64, 2, 2, 8, 1, 0, 0).Bytes(), (&fileWriter{}).i32(1<<21).Bytes()...), ErrInvalid},
		{"token length lies", append((&fileWriter{}).u32(Magic).i32(40, 16, 64, 2, 2, 8, 64, 2, 2, 8, 1, 0, 0, 1).Bytes(), (&fileWriter{}).u32(1<<31).Bytes()...), ErrInvalid},
		{"token past end", append((&fileWriter{}).u32(Magic).i32(40, 16, 64, 2, 2, 8, 64, 2, 2, 8, 1, 0, 0, 1).Bytes(), (&fileWriter{}).u32(100).Bytes()...), ErrTruncated},
		{"n_dims 0", base().i32(0, 1, 0).Bytes(), ErrInvalid},
		{"n_dims 9", base().i32(9, 1, 0).Bytes(), ErrInvalid},
		{"name length negative", base().i32(1, -5, 0).Bytes(), ErrInvalid},
		{"name length huge", base().i32(1, 1<<30, 0).Bytes(), ErrInvalid},
		{"unknown type", base().i32(1, 1, 4).Bytes(), ErrUnknownType},
		{"type 2^31", base().i32(1, 1, math.MinInt32).Bytes(), ErrUnknownType},
		{"zero dim", base().i32(2, 1, 0, 4, 0).Bytes(), ErrInvalid},
		{"negative dim", base().i32(1, 1, 0, -4).Bytes(), ErrInvalid},
		{"dims overflow", base().i32(4, 1, 0, math.MaxInt32, math.MaxInt32, math.MaxInt32, math.MaxInt32).WriteStringB("w").Bytes(), ErrInvalid},
		{"block misaligned", base().i32(1, 1, int32(TypeQ4_0), 33).WriteStringB("w").Bytes(), ErrInvalid},
		{"data past end", base().i32(1, 1, 0, 1000).WriteStringB("w").Bytes(), ErrTruncated},
		{"name past end", base().i32(1, 10, 0, 4).WriteStringB("abc").Bytes(), ErrTruncated},
		{"half header", base().i32(1).Bytes(), ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Read(bytes.NewReader(c.data), int64(len(c.data)))
			if !errors.Is(err, c.want) {
				t.Fatalf("Read = %v, %v; want %v", m, err, c.want)
			}
			if c.want != ErrBadMagic && len(c.data) > 0 && !bytes.Contains([]byte(err.Error()), []byte("offset")) {
				t.Errorf("error does not name an offset: %v", err)
			}
		})
	}
}

func (w *fileWriter) WriteStringB(s string) *fileWriter { w.WriteString(s); return w }

// TestCheckWhisperRejectsWrongFiles: unknown names, wrong shapes and missing
// tensors are what makes whisper.cpp refuse a file.
func TestCheckWhisperRejectsWrongFiles(t *testing.T) {
	h := tinyHParams(1)
	for name, data := range map[string][]byte{
		"unknown": (&fileWriter{}).header(h, 8, 9, nil).tensor("bogus", TypeF32, []int64{4}, -1).Bytes(),
		"shape":   (&fileWriter{}).header(h, 8, 9, nil).tensor("decoder.ln.bias", TypeF32, []int64{4}, -1).Bytes(),
		"missing": (&fileWriter{}).header(h, 8, 9, nil).tensor("decoder.ln.bias", TypeF32, []int64{64}, -1).Bytes(),
	} {
		m, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := m.CheckWhisper(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: CheckWhisper = %v", name, err)
		}
	}
}

// TestReadSeeksInsteadOfReading: a reader that fails on any Read beyond the
// headers proves tensor data is skipped with Seek.
func TestReadSeeksInsteadOfReading(t *testing.T) {
	h := tinyHParams(1)
	w := (&fileWriter{}).header(h, 8, 9, nil)
	w.tensor("decoder.ln.bias", TypeF32, []int64{64}, -1)
	hdr := int64(w.Len())
	w.tensor("decoder.token_embedding.weight", TypeF16, []int64{64, 1 << 16}, -1) // 8 MiB
	data := w.Bytes()
	r := &countingReader{ReadSeeker: bytes.NewReader(data)}
	m, err := Read(r, int64(len(data)))
	if err != nil || len(m.Tensors) != 2 {
		t.Fatalf("Read: %v", err)
	}
	if r.read > hdr+(64<<10)+4096 {
		t.Errorf("read %d bytes of a %d-byte file; data should be seeked over", r.read, len(data))
	}
}

func TestTypeJSON(t *testing.T) {
	raw, err := json.Marshal(map[Type]int64{TypeQ5_0: 1, TypeF32: 2})
	if err != nil || string(raw) != `{"f32":2,"q5_0":1}` {
		t.Fatalf("%s %v", raw, err)
	}
	var back map[Type]int64
	if err := json.Unmarshal(raw, &back); err != nil || back[TypeQ5_0] != 1 {
		t.Fatalf("%v %v", back, err)
	}
	var bad Type
	if err := bad.UnmarshalText([]byte("q9_9")); !errors.Is(err, ErrUnknownType) {
		t.Errorf("q9_9: %v", err)
	}
}
