package ggml

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
)

// Magic is the first little-endian uint32 of a whisper.cpp ggml file
// (GGML_FILE_MAGIC, "ggml").
const Magic = 0x67676d6c

// QntVersionFactor is GGML_QNT_VERSION_FACTOR: files store the hparam ftype as
// qntvr*1000 + ftype.
const QntVersionFactor = 1000

// Limits on length fields, far above anything whisper.cpp models use and low
// enough that a hostile file can neither make the reader allocate much nor
// overflow the size arithmetic.
const (
	MaxVocab    = 1 << 20 // whisper: 51,864-51,866 tokens
	MaxTokenLen = 1 << 16 // whisper tokens are at most ~130 bytes
	MaxMelBands = 1024    // whisper: 80 or 128
	MaxFFTBins  = 1 << 16 // whisper: 201
	MaxDims     = 4       // GGML_MAX_DIMS
	MaxNameLen  = 1024    // whisper names are < 64 bytes (GGML_MAX_NAME)
	MaxTensors  = 1 << 16 // whisper large: 1,259 tensors
	maxDim      = 1<<31 - 1
	maxHParam   = 1 << 20
)

// Sentinel errors; every error Read returns wraps one of them.
var (
	ErrBadMagic    = errors.New("not a ggml model file (bad magic)")
	ErrTruncated   = errors.New("file is truncated")
	ErrInvalid     = errors.New("invalid field")
	ErrUnknownType = errors.New("unknown ggml type")
)

// HParams are the eleven int32 hyper-parameters of a whisper.cpp model, in
// file order. FType has the quantization version already split off.
type HParams struct {
	NVocab      int32 `json:"n_vocab"`
	NAudioCtx   int32 `json:"n_audio_ctx"`
	NAudioState int32 `json:"n_audio_state"`
	NAudioHead  int32 `json:"n_audio_head"`
	NAudioLayer int32 `json:"n_audio_layer"`
	NTextCtx    int32 `json:"n_text_ctx"`
	NTextState  int32 `json:"n_text_state"`
	NTextHead   int32 `json:"n_text_head"`
	NTextLayer  int32 `json:"n_text_layer"`
	NMels       int32 `json:"n_mels"`
	FType       FType `json:"ftype"`
	QntVersion  int32 `json:"qntvr"`
}

// Tensor is one tensor header: its name, type, dimensions (ggml order, ne[0]
// first), where its data starts in the file and how many bytes it has.
type Tensor struct {
	Name   string  `json:"name"`
	Type   Type    `json:"type"`
	Dims   []int64 `json:"dims"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
}

// Model is what Read learns from a file.
type Model struct {
	HParams
	MelBands   int32    `json:"mel_bands"`  // filters.n_mel
	MelFFTBins int32    `json:"mel_fft"`    // filters.n_fft
	VocabSize  int32    `json:"vocab_size"` // tokens stored in the file
	Tensors    []Tensor `json:"tensors"`    // in file order; empty for test models
	FileBytes  int64    `json:"file_bytes"`
	// Empty is true for files that end after the vocabulary (whisper.cpp's
	// for-tests models): whisper.cpp loads them as zero-weight models with
	// full-size buffers, so WeightBytes comes from ExpectedTensors.
	Empty bool `json:"empty"`
	// WeightBytes is the sum of the tensors' bytes (whisper.cpp's "model
	// size"), or for an empty file the size whisper.cpp allocates for it.
	WeightBytes int64 `json:"weight_bytes"`
	// BytesByType splits WeightBytes by ggml type.
	BytesByType map[Type]int64 `json:"bytes_by_type"`
}

// WeightType is the type of the model's big matrices.
func (m *Model) WeightType() Type { t, _ := m.FType.WeightType(); return t }

// ReadFile opens path and reads its header with Read.
func ReadFile(path string) (*Model, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ggml: open model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("ggml: stat model: %w", err)
	}
	m, err := Read(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Read parses a whisper.cpp ggml model of size bytes from r: header,
// mel filters and vocabulary are read (tokens are skipped, not kept), then
// every tensor header is read and its data seeked over. It allocates at most
// a few kilobytes plus one Tensor per tensor, whatever the file claims.
func Read(r io.ReadSeeker, size int64) (*Model, error) {
	if size < 0 {
		return nil, fmt.Errorf("ggml: negative size %d: %w", size, ErrInvalid)
	}
	c := &cursor{r: r, br: bufio.NewReaderSize(r, 64<<10), size: size}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("ggml: seek to start: %w", err)
	}
	m := &Model{FileBytes: size, BytesByType: map[Type]int64{}}
	if err := readHeader(c, m); err != nil {
		return nil, err
	}
	if err := readTensors(c, m); err != nil {
		return nil, err
	}
	if len(m.Tensors) == 0 {
		m.Empty = true
		exp, err := ExpectedTensors(m.HParams)
		if err != nil {
			return nil, fmt.Errorf("ggml: size empty model: %w", err)
		}
		for _, t := range exp {
			m.WeightBytes += t.Bytes
			m.BytesByType[t.Type] += t.Bytes
		}
	}
	return m, nil
}

func readHeader(c *cursor, m *Model) error {
	magic, err := c.u32("magic")
	if err != nil {
		return err
	}
	if magic != Magic {
		return fmt.Errorf("ggml: magic %#08x at offset 0: %w", magic, ErrBadMagic)
	}
	off := c.pos
	var hp [11]int32
	for i := range hp {
		if hp[i], err = c.i32("hparams"); err != nil {
			return err
		}
	}
	h := HParams{hp[0], hp[1], hp[2], hp[3], hp[4], hp[5], hp[6], hp[7], hp[8], hp[9],
		FType(hp[10] % QntVersionFactor), hp[10] / QntVersionFactor}
	if err := h.Validate(); err != nil {
		return fmt.Errorf("ggml: hparams at offset %d: %w", off, err)
	}
	m.HParams = h
	if err := readMel(c, m); err != nil {
		return err
	}
	return readVocab(c, m)
}

func readMel(c *cursor, m *Model) error {
	off := c.pos
	nMel, err := c.i32("mel filters")
	if err != nil {
		return err
	}
	nFFT, err := c.i32("mel filters")
	if err != nil {
		return err
	}
	if nMel < 0 || nMel > MaxMelBands || nFFT < 0 || nFFT > MaxFFTBins {
		return fmt.Errorf("ggml: mel filters at offset %d: n_mel %d, n_fft %d out of range: %w",
			off, nMel, nFFT, ErrInvalid)
	}
	m.MelBands, m.MelFFTBins = nMel, nFFT
	return c.skip(int64(nMel)*int64(nFFT)*4, "mel filter data")
}

func readVocab(c *cursor, m *Model) error {
	off := c.pos
	n, err := c.i32("vocabulary size")
	if err != nil {
		return err
	}
	if n < 0 || n > MaxVocab {
		return fmt.Errorf("ggml: vocabulary size %d at offset %d (max %d): %w", n, off, MaxVocab, ErrInvalid)
	}
	m.VocabSize = n
	for i := int32(0); i < n; i++ {
		toff := c.pos
		l, err := c.u32("token length")
		if err != nil {
			return err
		}
		if l > MaxTokenLen {
			return fmt.Errorf("ggml: token %d length %d at offset %d (max %d): %w", i, l, toff, MaxTokenLen, ErrInvalid)
		}
		if err := c.skip(int64(l), "token"); err != nil {
			return err
		}
	}
	return nil
}

func readTensors(c *cursor, m *Model) error {
	for c.pos < c.size {
		if len(m.Tensors) >= MaxTensors {
			return fmt.Errorf("ggml: more than %d tensors at offset %d: %w", MaxTensors, c.pos, ErrInvalid)
		}
		t, err := readTensor(c, len(m.Tensors))
		if err != nil {
			return err
		}
		m.Tensors = append(m.Tensors, t)
		m.WeightBytes += t.Bytes
		m.BytesByType[t.Type] += t.Bytes
	}
	return nil
}

func readTensor(c *cursor, idx int) (Tensor, error) {
	off := c.pos
	var hdr [3]int32
	for i := range hdr {
		v, err := c.i32(fmt.Sprintf("tensor %d header", idx))
		if err != nil {
			return Tensor{}, err
		}
		hdr[i] = v
	}
	nDims, nameLen, typ := hdr[0], hdr[1], Type(uint32(hdr[2]))
	bad := func(format string, a ...any) error {
		return fmt.Errorf("ggml: tensor %d at offset %d: %s: %w", idx, off, fmt.Sprintf(format, a...), ErrInvalid)
	}
	if nDims < 1 || nDims > MaxDims {
		return Tensor{}, bad("n_dims %d not in 1..%d", nDims, MaxDims)
	}
	if nameLen < 1 || nameLen > MaxNameLen {
		return Tensor{}, bad("name length %d not in 1..%d", nameLen, MaxNameLen)
	}
	if !typ.Known() {
		return Tensor{}, fmt.Errorf("ggml: tensor %d at offset %d: type %d: %w", idx, off, hdr[2], ErrUnknownType)
	}
	dims := make([]int64, nDims)
	for i := range dims {
		v, err := c.i32(fmt.Sprintf("tensor %d dims", idx))
		if err != nil {
			return Tensor{}, err
		}
		if v < 1 {
			return Tensor{}, bad("dimension %d is %d", i, v)
		}
		dims[i] = int64(v)
	}
	name, err := c.bytes(int(nameLen), fmt.Sprintf("tensor %d name", idx))
	if err != nil {
		return Tensor{}, err
	}
	n, err := TensorBytes(typ, dims)
	if err != nil {
		return Tensor{}, fmt.Errorf("ggml: tensor %d %q at offset %d: %w", idx, name, off, err)
	}
	t := Tensor{Name: string(name), Type: typ, Dims: dims, Offset: c.pos, Bytes: n}
	if err := c.skip(n, fmt.Sprintf("tensor %d %q data", idx, name)); err != nil {
		return Tensor{}, err
	}
	return t, nil
}

// TensorBytes is ggml_nbytes of a contiguous tensor: rows of ne[0] elements
// stored in blocks. ne[0] must be a multiple of the type's block size.
func TensorBytes(t Type, dims []int64) (int64, error) {
	tr, ok := typeTraits(t)
	if !ok {
		return 0, fmt.Errorf("type %d: %w", uint32(t), ErrUnknownType)
	}
	if len(dims) == 0 || len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dimensions: %w", len(dims), ErrInvalid)
	}
	for i, d := range dims {
		if d < 1 || d > maxDim {
			return 0, fmt.Errorf("dimension %d is %d: %w", i, d, ErrInvalid)
		}
	}
	if dims[0]%tr.blockSize != 0 {
		return 0, fmt.Errorf("ne[0]=%d is not a multiple of the %s block size %d: %w",
			dims[0], tr.name, tr.blockSize, ErrInvalid)
	}
	n := uint64(dims[0]/tr.blockSize) * uint64(tr.typeSize)
	for _, d := range dims[1:] {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 0, fmt.Errorf("size of %v %s overflows: %w", dims, tr.name, ErrInvalid)
		}
		n = lo
	}
	return int64(n), nil
}

// cursor reads little-endian fields through a buffer, knows its offset and
// the file size, and skips large spans with Seek.
type cursor struct {
	r    io.ReadSeeker
	br   *bufio.Reader
	pos  int64
	size int64
	buf  [4]byte
}

func (c *cursor) truncated(what string, need int64) error {
	return fmt.Errorf("ggml: %s at offset %d needs %d bytes, file has %d: %w",
		what, c.pos, need, c.size-c.pos, ErrTruncated)
}

func (c *cursor) read(p []byte, what string) error {
	if int64(len(p)) > c.size-c.pos {
		return c.truncated(what, int64(len(p)))
	}
	if _, err := io.ReadFull(c.br, p); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return c.truncated(what, int64(len(p)))
		}
		return fmt.Errorf("ggml: read %s at offset %d: %w", what, c.pos, err)
	}
	c.pos += int64(len(p))
	return nil
}

func (c *cursor) u32(what string) (uint32, error) {
	if err := c.read(c.buf[:], what); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(c.buf[:]), nil
}

func (c *cursor) i32(what string) (int32, error) {
	v, err := c.u32(what)
	return int32(v), err
}

func (c *cursor) bytes(n int, what string) ([]byte, error) {
	p := make([]byte, n)
	return p, c.read(p, what)
}

// skip advances n bytes: from the buffer when they are there, else by Seek.
func (c *cursor) skip(n int64, what string) error {
	if n < 0 || n > c.size-c.pos {
		return c.truncated(what, n)
	}
	if n <= int64(c.br.Buffered()) {
		_, err := c.br.Discard(int(n))
		c.pos += n
		return err
	}
	c.pos += n
	if _, err := c.r.Seek(c.pos, io.SeekStart); err != nil {
		return fmt.Errorf("ggml: seek past %s to offset %d: %w", what, c.pos, err)
	}
	c.br.Reset(c.r)
	return nil
}
