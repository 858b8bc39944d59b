package ggml

import (
	"fmt"
	"slices"
)

// Validate checks that every hyper-parameter is positive, no larger than
// sizes that would overflow the arithmetic here, and that the ftype is one
// whisper.cpp accepts.
func (h HParams) Validate() error {
	fields := []struct {
		name string
		v    int32
	}{
		{"n_vocab", h.NVocab}, {"n_audio_ctx", h.NAudioCtx}, {"n_audio_state", h.NAudioState},
		{"n_audio_head", h.NAudioHead}, {"n_audio_layer", h.NAudioLayer}, {"n_text_ctx", h.NTextCtx},
		{"n_text_state", h.NTextState}, {"n_text_head", h.NTextHead}, {"n_text_layer", h.NTextLayer},
		{"n_mels", h.NMels},
	}
	for _, f := range fields {
		if f.v < 1 || f.v > maxHParam {
			return fmt.Errorf("%s = %d not in 1..%d: %w", f.name, f.v, maxHParam, ErrInvalid)
		}
	}
	if h.NAudioLayer > 4096 || h.NTextLayer > 4096 || h.NMels > MaxMelBands {
		return fmt.Errorf("layers %d/%d or n_mels %d too large: %w", h.NAudioLayer, h.NTextLayer, h.NMels, ErrInvalid)
	}
	if h.QntVersion < 0 || h.FType < 0 {
		return fmt.Errorf("ftype %d (qntvr %d) is negative: %w", h.FType, h.QntVersion, ErrInvalid)
	}
	if _, ok := h.FType.WeightType(); !ok {
		return fmt.Errorf("ftype %d: whisper.cpp rejects it (bad ftype): %w", h.FType, ErrInvalid)
	}
	return nil
}

// Family is whisper.cpp's model type, decided by n_audio_layer the way
// whisper_model_load does ("tiny", "base", "small", "medium", "large"),
// or "unknown".
func (h HParams) Family() string {
	switch h.NAudioLayer {
	case 4:
		return "tiny"
	case 6:
		return "base"
	case 12:
		return "small"
	case 24:
		return "medium"
	case 32:
		return "large"
	}
	return "unknown"
}

// Params is the number of weight elements (parameters, with the positional
// embeddings) of the model the hparams describe.
func (h HParams) Params() int64 {
	exp, err := ExpectedTensors(h)
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range exp {
		e := int64(1)
		for _, d := range t.Dims {
			e *= d
		}
		n += e
	}
	return n
}

// ExpectedTensors lists the tensors whisper.cpp 1.9.5 creates for these
// hparams in whisper_model_load (src/whisper.cpp), with the names the
// converters write, ggml shapes and types: the big matrices in the weight
// type, the convolution kernels in f16 (f32 in an f32 model), everything
// else f32. Offsets are zero. Files without tensors are sized from it.
func ExpectedTensors(h HParams) ([]Tensor, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	w, _ := h.FType.WeightType()
	conv := TypeF16 // vtype
	if w == TypeF32 {
		conv = TypeF32
	}
	b := &tensorList{}
	as, ac, ts := int64(h.NAudioState), int64(h.NAudioCtx), int64(h.NTextState)
	b.add("encoder.positional_embedding", TypeF32, as, ac)
	b.add("encoder.conv1.weight", conv, 3, int64(h.NMels), as)
	b.add("encoder.conv1.bias", TypeF32, 1, as)
	b.add("encoder.conv2.weight", conv, 3, as, as)
	b.add("encoder.conv2.bias", TypeF32, 1, as)
	b.add("encoder.ln_post.weight", TypeF32, as)
	b.add("encoder.ln_post.bias", TypeF32, as)
	for i := 0; i < int(h.NAudioLayer); i++ {
		b.block(fmt.Sprintf("encoder.blocks.%d.", i), w, as, false)
	}
	b.add("decoder.positional_embedding", TypeF32, ts, int64(h.NTextCtx))
	b.add("decoder.token_embedding.weight", w, ts, int64(h.NVocab))
	b.add("decoder.ln.weight", TypeF32, ts)
	b.add("decoder.ln.bias", TypeF32, ts)
	for i := 0; i < int(h.NTextLayer); i++ {
		b.block(fmt.Sprintf("decoder.blocks.%d.", i), w, ts, true)
	}
	return b.ts, b.err
}

type tensorList struct {
	ts  []Tensor
	err error
}

func (b *tensorList) add(name string, t Type, dims ...int64) {
	n, err := TensorBytes(t, dims)
	if err != nil && b.err == nil {
		b.err = fmt.Errorf("tensor %s: %w", name, err)
	}
	b.ts = append(b.ts, Tensor{Name: name, Type: t, Dims: slices.Clone(dims), Bytes: n})
}

// block adds one transformer layer: MLP, self-attention and, in the
// decoder, cross-attention, in whisper_model_load's order.
func (b *tensorList) block(p string, w Type, s int64, cross bool) {
	b.add(p+"mlp_ln.weight", TypeF32, s)
	b.add(p+"mlp_ln.bias", TypeF32, s)
	b.add(p+"mlp.0.weight", w, s, 4*s)
	b.add(p+"mlp.0.bias", TypeF32, 4*s)
	b.add(p+"mlp.2.weight", w, 4*s, s)
	b.add(p+"mlp.2.bias", TypeF32, s)
	b.attention(p+"attn", w, s)
	if cross {
		b.attention(p+"cross_attn", w, s)
	}
}

func (b *tensorList) attention(p string, w Type, s int64) {
	b.add(p+"_ln.weight", TypeF32, s)
	b.add(p+"_ln.bias", TypeF32, s)
	b.add(p+".query.weight", w, s, s)
	b.add(p+".query.bias", TypeF32, s)
	b.add(p+".key.weight", w, s, s)
	b.add(p+".value.weight", w, s, s)
	b.add(p+".value.bias", TypeF32, s)
	b.add(p+".out.weight", w, s, s)
	b.add(p+".out.bias", TypeF32, s)
}

// CheckWhisper compares a file's tensors with ExpectedTensors the way
// whisper_model_load does: every tensor known, with the expected shape and
// size, and all of them present. Empty files pass.
func (m *Model) CheckWhisper() error {
	if m.Empty {
		return nil
	}
	exp, err := ExpectedTensors(m.HParams)
	if err != nil {
		return err
	}
	want := make(map[string]Tensor, len(exp))
	for _, t := range exp {
		want[t.Name] = t
	}
	for _, t := range m.Tensors {
		e, ok := want[t.Name]
		if !ok {
			return fmt.Errorf("unknown tensor %q: %w", t.Name, ErrInvalid)
		}
		if !slices.Equal(shape3(e.Dims), shape3(t.Dims)) {
			return fmt.Errorf("tensor %q has shape %v, whisper.cpp expects %v: %w", t.Name, t.Dims, e.Dims, ErrInvalid)
		}
		delete(want, t.Name)
	}
	if len(want) > 0 {
		return fmt.Errorf("%d of %d tensors missing: %w", len(want), len(exp), ErrInvalid)
	}
	return nil
}

// shape3 pads dims with ones to three, as whisper.cpp compares ne[0..2].
func shape3(d []int64) []int64 {
	out := []int64{1, 1, 1}
	copy(out, d)
	return out
}
