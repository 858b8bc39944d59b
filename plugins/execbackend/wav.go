package execbackend

import (
	"encoding/binary"
	"io"
	"os"
	"time"
)

// wavDuration reads a RIFF/WAVE header's byte rate and data size; 0 when the
// file is not a WAV file it understands.
func wavDuration(path string) time.Duration {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var hdr [12]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[:4]) != "RIFF" || string(hdr[8:]) != "WAVE" {
		return 0
	}
	var byteRate uint32
	for range 64 { // chunks before "data" are few
		var ch [8]byte
		if _, err := io.ReadFull(f, ch[:]); err != nil {
			return 0
		}
		size := binary.LittleEndian.Uint32(ch[4:])
		switch string(ch[:4]) {
		case "fmt ":
			var fmtc [16]byte
			if size < 16 {
				return 0
			}
			if _, err := io.ReadFull(f, fmtc[:]); err != nil {
				return 0
			}
			byteRate = binary.LittleEndian.Uint32(fmtc[8:])
			size -= 16
		case "data":
			if byteRate == 0 {
				return 0
			}
			return time.Duration(float64(size) / float64(byteRate) * float64(time.Second))
		}
		if _, err := f.Seek(int64(size)+int64(size&1), io.SeekCurrent); err != nil {
			return 0
		}
	}
	return 0
}
