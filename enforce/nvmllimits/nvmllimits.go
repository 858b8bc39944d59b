// Package nvmllimits sets the NVIDIA driver's per-cgroup GPU-memory limits
// (the `nvml-limits` enforcement tier, issue 27): driver R615 / CUDA 13.4
// adds nvmlDeviceSetMemoryLimits_v1, which go-nvml v0.13 does not bind, so
// it is called here through dlopen/dlsym on libnvidia-ml.so.1.
//
// The call and its argument, as NVIDIA's NVML API reference gives them
// (docs.nvidia.com/deploy/nvml-api, structnvmlSetMemoryLimits__v1__t):
//
//	nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t *limits);
//	typedef struct {
//	    const char *nameSpace;        // full path of the cgroup's sysfs directory
//	    unsigned long long softLimit; // bytes
//	    unsigned long long hardLimit; // bytes
//	} nvmlSetMemoryLimits_v1_t;
//
// Limits are cleared with softLimit 0 and hardLimit
// NVML_DEVICE_MEMORY_LIMIT_MAX, which this package takes to be the largest
// unsigned long long (the header was not at hand; see docs/enforcement.md).
// Setting needs root; MIG devices are refused by the driver.
package nvmllimits

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
	const char *nameSpace;
	unsigned long long softLimit;
	unsigned long long hardLimit;
} nvmlSetMemoryLimits_v1_t;

typedef int (*init_fn)(void);
typedef int (*handle_fn)(const char *, nvmlDevice_t *);
typedef int (*set_fn)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t *);
typedef const char *(*errstr_fn)(int);

static int call_init(void *f) { return ((init_fn)f)(); }
static int call_handle(void *f, const char *uuid, nvmlDevice_t *dev) { return ((handle_fn)f)(uuid, dev); }
static int call_set(void *f, nvmlDevice_t dev, const char *ns, unsigned long long soft, unsigned long long hard) {
	nvmlSetMemoryLimits_v1_t l = { ns, soft, hard };
	return ((set_fn)f)(dev, &l);
}
static const char *call_errstr(void *f, int rc) { return f ? ((errstr_fn)f)(rc) : ""; }

// open_lib is dlopen with dlerror read on the same thread (a goroutine may
// change threads between two cgo calls, and dlerror's state is per thread).
static void *open_lib(const char *path, const char **why) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	*why = h ? NULL : dlerror();
	return h;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// DefaultLibrary is the NVML library the driver installs.
const DefaultLibrary = "libnvidia-ml.so.1"

// SetSymbol is the memory-limits call.
const SetSymbol = "nvmlDeviceSetMemoryLimits_v1"

// Unlimited is the hard limit that, with soft 0, clears a cgroup's limits
// (NVML_DEVICE_MEMORY_LIMIT_MAX, assumed ULLONG_MAX).
const Unlimited = math.MaxUint64

// ErrNoCall: the library has no memory-limits call (a driver before R615).
var ErrNoCall = errors.New("nvmllimits: " + SetSymbol + " not exported (driver older than R615)")

// ErrClosed: Set or Clear after Close (the library is unloaded).
var ErrClosed = errors.New("nvmllimits: library closed")

// Lib is an open, initialised NVML library with the memory-limits call.
// Its methods may be called from several goroutines: Close waits for the
// calls in flight, and a call after Close is ErrClosed, never a call into
// the unloaded library.
type Lib struct {
	mu       sync.RWMutex   // held for reading during each call into the library
	handle   unsafe.Pointer // nil once closed
	init     unsafe.Pointer
	shutdown unsafe.Pointer
	byUUID   unsafe.Pointer
	set      unsafe.Pointer
	errStr   unsafe.Pointer
}

// Has reports whether the library at path (a name the loader searches, or a
// path) loads and exports the memory-limits call. It initialises nothing.
func Has(path string) bool {
	h, err := dlopen(path)
	if err != nil {
		return false
	}
	defer C.dlclose(h)
	return sym(h, SetSymbol) != nil
}

// Open loads the library at path and initialises NVML. ErrNoCall: it has
// no memory-limits call.
func Open(path string) (*Lib, error) {
	h, err := dlopen(path)
	if err != nil {
		return nil, err
	}
	l := &Lib{handle: h, init: sym(h, "nvmlInit_v2"), shutdown: sym(h, "nvmlShutdown"),
		byUUID: sym(h, "nvmlDeviceGetHandleByUUID"), set: sym(h, SetSymbol), errStr: sym(h, "nvmlErrorString")}
	switch {
	case l.set == nil:
		C.dlclose(h)
		return nil, ErrNoCall
	case l.init == nil || l.byUUID == nil:
		C.dlclose(h)
		return nil, fmt.Errorf("nvmllimits: %s lacks nvmlInit_v2 or nvmlDeviceGetHandleByUUID", path)
	}
	if rc := C.call_init(l.init); rc != 0 {
		C.dlclose(h)
		return nil, fmt.Errorf("nvmllimits: nvmlInit_v2: %w", l.err(rc))
	}
	return l, nil
}

// Set sets the limits of the GPU with uuid for the cgroup whose directory
// is cgroupDir: soft and hard, in bytes.
func (l *Lib) Set(uuid, cgroupDir string, soft, hard uint64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.handle == nil {
		return fmt.Errorf("nvmllimits: set limits on %s for %s: %w", uuid, cgroupDir, ErrClosed)
	}
	cu, cns := C.CString(uuid), C.CString(cgroupDir)
	defer C.free(unsafe.Pointer(cu))
	defer C.free(unsafe.Pointer(cns))
	var dev C.nvmlDevice_t
	if rc := C.call_handle(l.byUUID, cu, &dev); rc != 0 {
		return fmt.Errorf("nvmllimits: device %s: %w", uuid, l.err(rc))
	}
	if rc := C.call_set(l.set, dev, cns, C.ulonglong(soft), C.ulonglong(hard)); rc != 0 {
		return fmt.Errorf("nvmllimits: set limits %d/%d on %s for %s: %w", soft, hard, uuid, cgroupDir, l.err(rc))
	}
	return nil
}

// Clear removes the limits of the GPU with uuid for cgroupDir (soft 0,
// hard Unlimited).
func (l *Lib) Clear(uuid, cgroupDir string) error { return l.Set(uuid, cgroupDir, 0, Unlimited) }

// Close shuts NVML down (its use count) and unloads the library, once the
// calls in flight have returned; closing again does nothing.
func (l *Lib) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.handle == nil {
		return nil
	}
	if l.shutdown != nil {
		C.call_init(l.shutdown) // same signature: int (void)
	}
	C.dlclose(l.handle)
	l.handle, l.init, l.shutdown, l.byUUID, l.set, l.errStr = nil, nil, nil, nil, nil, nil
	return nil
}

// NVMLError is a failed NVML call's nvmlReturn_t.
type NVMLError struct {
	Code int
	Text string
}

func (e *NVMLError) Error() string { return fmt.Sprintf("NVML error %d (%s)", e.Code, e.Text) }

func (l *Lib) err(rc C.int) error {
	return &NVMLError{Code: int(rc), Text: C.GoString(C.call_errstr(l.errStr, rc))}
}

func dlopen(path string) (unsafe.Pointer, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var why *C.char
	h := C.open_lib(cp, &why)
	if h == nil {
		return nil, fmt.Errorf("nvmllimits: dlopen %s: %s", path, C.GoString(why))
	}
	return h, nil
}

func sym(h unsafe.Pointer, name string) unsafe.Pointer {
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	return C.dlsym(h, cn)
}
