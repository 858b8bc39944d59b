package host

import "syscall"

const sigZero = syscall.Signal(0)
