package framework

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/ferry-io/ferry/test/crashloop"
)

// Proc is a ferry process a spec starts, kills and restarts; the end of
// the node that started it stops it (SIGTERM, then SIGKILL). A supervised
// one (crashloop.Process.Restart) is restarted with the kubelet's
// crash-loop back-off when it exits on its own, as a Deployment's pod
// would be.
type Proc struct {
	crashloop.Process
}

// newProc is a Proc of bin logging to log; supervised ones are restarted
// when they exit on their own.
func newProc(name, bin, log string, args []string, supervised bool) *Proc {
	return &Proc{crashloop.Process{Name: name, Binary: bin, Args: args, LogPath: log, Restart: supervised,
		Logger: GinkgoLogr, SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}}
}

// Start runs the process (again), appending to its log.
func (p *Proc) Start() {
	GinkgoHelper()
	Expect(p.Process.Start()).To(Succeed(), "start %s", p.Name)
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it;
// a supervised one is not restarted until Start.
func (p *Proc) Kill() {
	GinkgoHelper()
	Expect(p.Process.Kill()).To(Succeed(), "kill %s", p.Name)
}

// Stop ends the process with SIGTERM (it then removes what it made), or
// SIGKILL after 30 s.
func (p *Proc) Stop(context.Context) {
	if !p.Process.Stop(30 * time.Second) {
		Fail(fmt.Sprintf("%s did not stop within 30s of SIGTERM; its log: %s", p.Name, p.LogPath))
	}
}

// Log is the process's output so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}
