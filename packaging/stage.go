package packaging

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// stage returns p with every file that needs work before packaging replaced by a prepared copy in
// dir: executables stripped of debugging symbols (as Debian's dh_strip does) and given their
// packaged RUNPATH, manual pages gzipped.
// The originals are not touched.
func stage(ctx context.Context, p Package, dir string) (Package, error) {
	staged := p
	staged.Files = make([]File, len(p.Files))
	for i, f := range p.Files {
		dst := filepath.Join(dir, strconv.Itoa(i)+"-"+filepath.Base(f.Dst))
		var err error
		switch {
		case f.Gzip:
			err = gzipFile(f.Src, dst)
		case f.Library && f.Runpath != "":
			if err = copyFile(f.Src, dst); err == nil {
				err = SetRunpath(dst, f.Runpath)
			}
		case f.Library:
			dst = f.Src // shipped as built (Debian's libraries come stripped)
		case isExecutable(f):
			err = stripCopy(ctx, f.Src, dst)
			if err == nil && f.Runpath != "" {
				err = SetRunpath(dst, f.Runpath)
			}
		default:
			dst = f.Src
		}
		if err != nil {
			return Package{}, err
		}
		f.Src = dst
		staged.Files[i] = f
	}
	return staged, nil
}

// isExecutable reports whether f is a file (not a directory) with an execute bit.
func isExecutable(f File) bool { return f.Src != "" && f.Mode&0o111 != 0 }

// stripCopy copies an executable to dst and strips the copy.
func stripCopy(ctx context.Context, src, dst string) error {
	if err := copyFile(src, dst); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "strip", "--remove-section=.comment", "--remove-section=.note", dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("strip %s: %w: %s", src, err, out)
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
}

// gzipFile compresses src into dst at maximum compression without a name or time in the header, so
// that the result depends on the content only (reproducible, and what lintian expects of man pages).
func gzipFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		out.Close()
		return fmt.Errorf("gzip %s: %w", src, err)
	}
	if _, err := zw.Write(data); err != nil {
		out.Close()
		return fmt.Errorf("gzip %s: %w", src, err)
	}
	if err := zw.Close(); err != nil {
		out.Close()
		return fmt.Errorf("gzip %s: %w", src, err)
	}
	return out.Close()
}
