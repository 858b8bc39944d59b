package modelid

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFullHashOncePerPathSizeMtime: the full hash is computed at most once
// per (path, size, mtime), also across Cache values (processes) sharing the
// directory; a changed mtime or size computes it again.
func TestFullHashOncePerPathSizeMtime(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.bin")
	if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	calls := 0
	counting := func(ctx context.Context, p string) (string, error) {
		calls++
		return SHA256File(ctx, p)
	}
	cacheDir := filepath.Join(dir, "cache")
	for range 3 {
		c := Cache{Dir: cacheDir, Sum: counting}
		sum, err := c.SHA256(context.Background(), path)
		if err != nil || sum != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
			t.Fatalf("sha256(abc) = %s, %v", sum, err)
		}
	}
	if calls != 1 {
		t.Errorf("hashed %d times for one (path, size, mtime), want 1", calls)
	}
	later := time.Unix(1_700_000_000, 0)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	c := Cache{Dir: cacheDir, Sum: counting}
	for range 2 {
		if _, err := c.SHA256(context.Background(), path); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("after a new mtime: hashed %d times in all, want 2", calls)
	}
	if err := os.WriteFile(path, []byte("abcd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if sum, _ := c.SHA256(context.Background(), path); sum != "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589" || calls != 3 {
		t.Errorf("after a new size (same mtime): %s, %d hashes", sum, calls)
	}
}

func TestCheapReadsOnlyTheHead(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	head := make([]byte, HeadBytes)
	head[0] = 1
	tailA := append(append([]byte{}, head...), 'x')
	tailB := append(append([]byte{}, head...), 'y')
	for p, d := range map[string][]byte{a: tailA, b: tailB} {
		if err := os.WriteFile(p, d, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ia, err := Cheap(a)
	if err != nil {
		t.Fatal(err)
	}
	ib, _ := Cheap(b)
	if ia != ib || len(ia) != len("head:")+32+1+len("1048577") {
		t.Errorf("same head and size: %q vs %q", ia, ib)
	}
	if err := os.WriteFile(b, head[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if ic, _ := Cheap(b); ic == ia {
		t.Error("a different size must give a different identity")
	}
	if _, err := Cheap(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestSHA256FileStopsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SHA256File(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}
