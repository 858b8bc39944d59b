package preload_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsched/wsched/enforce/preload"
)

// The contention run's client (packaging/gpu/hog.c), which reaches the
// driver through dlopen and dlsym as the CUDA runtime does, is held to its
// cap: the lying client (lease 2 KiB, allocating 20 KiB here) gets
// CUDA_ERROR_OUT_OF_MEMORY (exit 3) at the cap, an honest one (within its
// lease) allocates everything.
func TestHogCappedOnFakeDriver(t *testing.T) {
	k := buildKit(t)
	hog := filepath.Join(k.dir, "hog")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-o", hog, "../../packaging/gpu/hog.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("cc hog.c: %v\n%s", err, out)
	}
	run := func(env map[string]string, bytes string, pause ...string) (string, int) {
		cmd := exec.Command(hog, append([]string{bytes, "0", "1024"}, pause...)...)
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+k.dir, "WSCHED_LEASE_ID=", "WSCHED_SOCKET=")
		for key, v := range env {
			cmd.Env = append(cmd.Env, key+"="+v)
		}
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("hog: %v", err)
		}
		return strings.TrimSpace(string(out)), cmd.ProcessState.ExitCode()
	}
	if out, code := run(nil, "20480"); code != 0 || !strings.Contains(out, "allocated 20480 of 20480") {
		t.Errorf("without the cap: exit %d, %q", code, out)
	}
	liar := preload.Env(k.lib, "", 2048, 0, "")
	if out, code := run(liar, "20480"); code != 3 || !strings.Contains(out, "allocated 2048 of 20480 bytes: out of memory (CUresult 2)") {
		t.Errorf("the liar under a 2048-byte cap: exit %d, %q", code, out)
	}
	if out, code := run(preload.Env(k.lib, "", 4096, 0, ""), "4096"); code != 0 {
		t.Errorf("an honest client under its cap: exit %d, %q", code, out)
	}
	// In two halves, a second apart: the second half meets the cap too.
	if out, code := run(preload.Env(k.lib, "", 3072, 0, ""), "4096", "1"); code != 3 || !strings.Contains(out, "allocated 3072 of 4096") {
		t.Errorf("in halves under a 3072-byte cap: exit %d, %q", code, out)
	}
}
