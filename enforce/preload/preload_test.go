package preload_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/wsched/wsched/enforce/preload"
)

// The cap holds on each path by which a program reaches the driver: the
// symbol by name (LD_PRELOAD interposes it), cuGetProcAddress (how the CUDA
// runtime resolves the driver) and dlsym on the program's own handle of
// libcuda.so.1. The refused allocation never reaches the driver, a free
// gives its bytes back, and cuMemGetInfo answers within the cap.
func TestCapRefusesPastLimit(t *testing.T) {
	k := buildKit(t)
	for _, mode := range []string{"direct", "procaddr", "dlsym"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{mode, "1000", "2000", "-1", "2000", "600"}
			bare := k.run(t, nil, args...)
			wantBare := []string{"alloc 1000 rc 0", "alloc 2000 rc 0", "free 1 rc 0", "alloc 2000 rc 0", "alloc 600 rc 0", "driver 4600"}
			if !slices.Equal(bare[:6], wantBare) {
				t.Fatalf("without the library: %q, want %q", bare, wantBare)
			}
			env := preload.Env(k.lib, "", 2000, 500, "")
			got := k.run(t, env, args...)
			want := []string{"alloc 1000 rc 0", "alloc 2000 rc 2", "free 1 rc 0", "alloc 2000 rc 0", "alloc 600 rc 2", "driver 2000", "info 500 2500"}
			if !slices.Equal(got, want) {
				t.Errorf("under the cap of 2500 bytes: %q, want %q", got, want)
			}
		})
	}
}

// Every allocation entry point is capped and its free gives the bytes back.
func TestCapEveryEntryPoint(t *testing.T) {
	k := buildKit(t)
	entries := []string{"cuMemAlloc", "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocPitch", "cuMemAllocPitch_v2",
		"cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemCreate",
		"cuArrayCreate", "cuArrayCreate_v2", "cuArray3DCreate", "cuArray3DCreate_v2", "cuMipmappedArrayCreate"}
	env := preload.Env(k.lib, "", 1500, 0, "")
	for _, e := range entries {
		got := k.run(t, env, "entry="+e, "1024", "1024", "-1", "1024")
		want := []string{"alloc 1024 rc 0", "alloc 1024 rc 2", "free 1 rc 0", "alloc 1024 rc 0", "driver 1024"}
		if !slices.Equal(got[:5], want) {
			t.Errorf("%s under a cap of 1500 bytes: %q, want %q", e, got, want)
		}
	}
}

// Another interposer loaded after the library, which finds the function it
// wraps with dlsym(RTLD_NEXT, …), gets libc's, not its own: the library's
// dlsym wrapper searches after the caller. (Its strtoll doubles: 1000 → 2000.)
func TestCapKeepsRTLDNext(t *testing.T) {
	k := buildKit(t)
	env := preload.Env(k.lib, k.next, 1<<20, 0, "")
	if env["LD_PRELOAD"] != k.lib+":"+k.next {
		t.Fatalf("LD_PRELOAD %q", env["LD_PRELOAD"])
	}
	got := k.run(t, env, "direct", "1000")
	if want := []string{"alloc 2000 rc 0", "driver 2000"}; !slices.Equal(got[:2], want) {
		t.Errorf("with an RTLD_NEXT interposer after the cap: %q, want %q", got, want)
	}
}

// Without a limit in the environment the library only counts.
func TestCapWithoutLimitPassesThrough(t *testing.T) {
	k := buildKit(t)
	got := k.run(t, map[string]string{"LD_PRELOAD": k.lib}, "direct", "1000", "2000")
	if want := []string{"alloc 1000 rc 0", "alloc 2000 rc 0", "driver 3000"}; !slices.Equal(got[:3], want) {
		t.Errorf("no limit: %q, want %q", got, want)
	}
}

// WSCHED_MEMORY_BYTES (the lease) is the cap when WSCHED_CUDA_LIMIT_BYTES
// is not set.
func TestCapDefaultsToLease(t *testing.T) {
	k := buildKit(t)
	got := k.run(t, map[string]string{"LD_PRELOAD": k.lib, "WSCHED_MEMORY_BYTES": "1500"}, "procaddr", "1000", "1000")
	if want := []string{"alloc 1000 rc 0", "alloc 1000 rc 2", "driver 1000"}; !slices.Equal(got[:3], want) {
		t.Errorf("lease 1500: %q, want %q", got, want)
	}
}

func TestEnv(t *testing.T) {
	env := preload.Env("/l/cap.so", "/x/a.so:/l/cap.so /y/b.so", 1<<30, 1<<29, "/run/w.sock")
	want := map[string]string{
		"LD_PRELOAD": "/l/cap.so:/x/a.so:/y/b.so", "WSCHED_CUDA_LIMIT_BYTES": strconv.FormatInt(3<<29, 10), "WSCHED_SOCKET": "/run/w.sock",
	}
	for key, v := range want {
		if env[key] != v {
			t.Errorf("%s = %q, want %q", key, env[key], v)
		}
	}
	if env := preload.Env("/l/cap.so", "", 100, -5, ""); env["WSCHED_CUDA_LIMIT_BYTES"] != "100" || env["WSCHED_SOCKET"] != "" {
		t.Errorf("negative borrow or no socket: %v", env)
	}
}
