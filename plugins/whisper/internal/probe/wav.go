//go:build whisper

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

var errWAV = errors.New("not a 16 kHz mono 16-bit PCM WAV")

// readWAV reads a 16 kHz mono PCM16 WAV into float32 samples in [-1, 1). The backend proper handles
// other formats; the probe only needs jfk.wav.
func readWAV(path string) ([]float32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read wav: %w", err)
	}
	if len(data) < 12 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WAVE" {
		return nil, fmt.Errorf("read wav %s: %w", path, errWAV)
	}
	var pcm []byte
	fmtOK := false
	for off := 12; off+8 <= len(data); {
		id := string(data[off : off+4])
		size := int(binary.LittleEndian.Uint32(data[off+4 : off+8]))
		body := off + 8
		if size < 0 || body+size > len(data) {
			size = len(data) - body
		}
		chunk := data[body : body+size]
		switch id {
		case "fmt ":
			fmtOK = len(chunk) >= 16 &&
				binary.LittleEndian.Uint16(chunk[0:2]) == 1 && // PCM
				binary.LittleEndian.Uint16(chunk[2:4]) == 1 && // mono
				binary.LittleEndian.Uint32(chunk[4:8]) == 16000 &&
				binary.LittleEndian.Uint16(chunk[14:16]) == 16
		case "data":
			pcm = chunk
		}
		off = body + size + size%2
	}
	if !fmtOK || pcm == nil {
		return nil, fmt.Errorf("read wav %s: %w", path, errWAV)
	}
	out := make([]float32, len(pcm)/2)
	for i := range out {
		out[i] = float32(int16(binary.LittleEndian.Uint16(pcm[2*i:]))) / 32768
	}
	return out, nil
}
