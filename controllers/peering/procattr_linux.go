package peering

import "syscall"

// childProcAttr puts a virtual kubelet process in a group of its own and
// has the kernel kill it when the controller manager dies.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
