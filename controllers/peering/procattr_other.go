//go:build !linux

package peering

import "syscall"

// childProcAttr puts a virtual kubelet process in a group of its own. Only
// Linux kills it with the controller manager (Pdeathsig); the process
// launcher is for Linux, and this file lets ferryctl, which shares this
// package's naming rules, build for macOS.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
