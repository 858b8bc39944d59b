package host

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the backend if the daemon dies without
// stopping it (SIGKILL, a crash): its lease is gone with the daemon, so its
// GPU memory must be too. (Under systemd the unit's cgroup is killed on
// restart anyway.)
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
