// Package modelid names model files for learning without reading them
// whole: the identity is a digest of the file's head (for a ggml file: the
// hparams, vocabulary and the first tensor headers, which fix its memory)
// plus its size. The full sha256, when something asks for it, is computed
// once per (path, size, mtime) and cached in a directory.
package modelid

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// HeadBytes is how much of a file the cheap identity reads.
const HeadBytes = 1 << 20

// Cheap is the learning identity of a model file: "head:<digest>:<size>",
// the digest being sha256 of its first HeadBytes bytes (shortened to 128
// bits). A copy or a touch keeps it; a different file of the same size and
// head is, as far as memory goes, the same model.
func Cheap(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("model identity: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", fmt.Errorf("model identity: %w", err)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, fh, HeadBytes); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("model identity: read %s: %w", path, err)
	}
	return "head:" + hex.EncodeToString(h.Sum(nil)[:16]) + ":" + strconv.FormatInt(st.Size(), 10), nil
}

// SHA256File hashes a file in a streaming way (it may be gigabytes),
// stopping when ctx ends.
func SHA256File(ctx context.Context, path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("hash model file: %w", err)
	}
	defer fh.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("hash model file: %w", err)
		}
		n, err := fh.Read(buf)
		h.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			return hex.EncodeToString(h.Sum(nil)), nil
		}
		if err != nil {
			return "", fmt.Errorf("hash model file %s: %w", path, err)
		}
	}
}

// Cache remembers full hashes by (absolute path, size, mtime). Dir ""
// caches nothing (every call hashes); Sum is the hash function (nil:
// SHA256File), injectable so tests can count calls.
type Cache struct {
	Dir string
	Sum func(ctx context.Context, path string) (string, error)
}

// SHA256 returns the file's sha256, from the cache when the file's path,
// size and mtime are the ones it was computed for.
func (c Cache) SHA256(ctx context.Context, path string) (string, error) {
	sum := c.Sum
	if sum == nil {
		sum = SHA256File
	}
	if c.Dir == "" {
		return sum(ctx, path)
	}
	entry, err := c.entry(path)
	if err != nil {
		return "", err
	}
	if b, err := os.ReadFile(entry); err == nil && len(b) == 2*sha256.Size {
		return string(b), nil
	}
	s, err := sum(ctx, path)
	if err != nil {
		return "", err
	}
	if err := writeAtomic(entry, []byte(s)); err != nil {
		return "", fmt.Errorf("cache model hash: %w", err)
	}
	return s, nil
}

// entry is the cache file for the file's current (path, size, mtime).
func (c Cache) entry(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("model hash cache: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("model hash cache: %w", err)
	}
	k := sha256.Sum256([]byte(abs + "\x00" + strconv.FormatInt(st.Size(), 10) + "\x00" + strconv.FormatInt(st.ModTime().UnixNano(), 10)))
	return filepath.Join(c.Dir, hex.EncodeToString(k[:16])), nil
}

func writeAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
