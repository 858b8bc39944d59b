package procwatch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ThreadGroup returns the thread group (process) that pid belongs to: pid
// itself for a process, its leader's PID for a thread ID. /proc answers for
// a thread ID as for a process (/proc/TID is hidden from listings only), but
// a thread's exit is not its process's, and pidfds, signals and NVML know
// processes: a TID must be resolved before it is stored or watched.
func ThreadGroup(procRoot string, pid int) (int, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	data, err := os.ReadFile(fmt.Sprintf("%s/%d/status", procRoot, pid))
	if err != nil {
		return 0, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Tgid:"))
		if !ok {
			continue
		}
		tgid, err := strconv.Atoi(string(bytes.TrimSpace(v)))
		if err != nil || tgid <= 0 {
			return 0, fmt.Errorf("process %d: malformed Tgid in status", pid)
		}
		return tgid, nil
	}
	return 0, fmt.Errorf("process %d: no Tgid in status", pid)
}

// BootID returns the kernel's boot ID (procRoot/sys/kernel/random/boot_id),
// which changes at every boot: PIDs and start times recorded under another
// boot ID name no process that runs now. "" when it cannot be read.
func BootID(procRoot string) string {
	data, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(data))
}
