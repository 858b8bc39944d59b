package ggml

import (
	"bytes"
	"encoding/binary"
)

// fileWriter builds ggml model files for tests, the way whisper.cpp's
// convert-pt-to-ggml.py lays them out: magic, 11 int32 hparams, mel filters,
// vocabulary, then for each tensor n_dims, name length, type, dims, name and
// data. Raw fields let tests write hostile values.
type fileWriter struct{ bytes.Buffer }

func (w *fileWriter) i32(vs ...int32) *fileWriter {
	for _, v := range vs {
		_ = binary.Write(&w.Buffer, binary.LittleEndian, v)
	}
	return w
}

func (w *fileWriter) u32(v uint32) *fileWriter {
	_ = binary.Write(&w.Buffer, binary.LittleEndian, v)
	return w
}

// header writes magic, hparams (ftype as qntvr*1000+ftype), nMel x nFFT
// zero filters and the given tokens.
func (w *fileWriter) header(h HParams, nMel, nFFT int32, tokens []string) *fileWriter {
	w.u32(Magic)
	w.i32(h.NVocab, h.NAudioCtx, h.NAudioState, h.NAudioHead, h.NAudioLayer,
		h.NTextCtx, h.NTextState, h.NTextHead, h.NTextLayer, h.NMels,
		h.QntVersion*QntVersionFactor+int32(h.FType))
	w.i32(nMel, nFFT)
	w.Write(make([]byte, 4*int(nMel)*int(nFFT)))
	w.i32(int32(len(tokens)))
	for _, t := range tokens {
		w.u32(uint32(len(t)))
		w.WriteString(t)
	}
	return w
}

// tensor writes one tensor header and size bytes of data (size < 0: the
// exact ggml size of the type and dims).
func (w *fileWriter) tensor(name string, t Type, dims []int64, size int64) *fileWriter {
	w.i32(int32(len(dims)), int32(len(name)), int32(t))
	for _, d := range dims {
		w.i32(int32(d))
	}
	w.WriteString(name)
	if size < 0 {
		n, err := TensorBytes(t, dims)
		if err != nil {
			panic(err)
		}
		size = n
	}
	w.Write(bytes.Repeat([]byte{0xA5}, int(size)))
	return w
}

// tinyHParams is a small but well-formed model: 2-layer, 64-wide.
func tinyHParams(ft FType) HParams {
	return HParams{NVocab: 40, NAudioCtx: 16, NAudioState: 64, NAudioHead: 2, NAudioLayer: 2,
		NTextCtx: 8, NTextState: 64, NTextHead: 2, NTextLayer: 2, NMels: 8, FType: ft}
}

// wholeModel writes a complete file for h with every tensor whisper.cpp
// expects, data included.
func wholeModel(h HParams) []byte {
	w := (&fileWriter{}).header(h, h.NMels, 9, []string{"a", "bb", "", "ccc"})
	exp, err := ExpectedTensors(h)
	if err != nil {
		panic(err)
	}
	for _, t := range exp {
		w.tensor(t.Name, t.Type, t.Dims, -1)
	}
	return w.Bytes()
}
