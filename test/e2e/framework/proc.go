package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// Proc is a ferry process a spec starts, kills and restarts; the end of
// the node that started it stops it (SIGTERM, then SIGKILL).
type Proc struct {
	Name string
	bin  string
	args []string
	log  string

	mu sync.Mutex
	// supervised restarts the process when it exits on its own, with the
	// kubelet's crash-loop backoff (10 s, doubling, at most 5 min), as a
	// Deployment's pod would be.
	supervised bool
	restarts   int
	stopped    bool // by Kill or Stop: not restarted
	cmd        *exec.Cmd
	done       chan struct{}
}

// crashLoopBackOff is the kubelet's first restart delay.
const crashLoopBackOff = 10 * time.Second

// Start runs the process (again), appending to its log.
func (p *Proc) Start() {
	GinkgoHelper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = false
	Expect(p.startLocked(crashLoopBackOff)).To(Succeed(), "start %s", p.Name)
}

func (p *Proc) startLocked(backoff time.Duration) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return err
	}
	done := make(chan struct{})
	started := time.Now()
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.supervised || p.stopped || p.cmd != cmd {
			return
		}
		if time.Since(started) > 10*time.Minute { // ran fine: the kubelet resets its backoff
			backoff = crashLoopBackOff
		}
		fmt.Fprintf(GinkgoWriter, "%s exited (%v); restarting it in %s\n", p.Name, cmd.ProcessState, backoff)
		time.AfterFunc(backoff, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.stopped || p.cmd != cmd {
				return
			}
			p.restarts++
			if err := p.startLocked(min(2*backoff, 5*time.Minute)); err != nil {
				fmt.Fprintf(GinkgoWriter, "restart %s: %v\n", p.Name, err)
			}
		})
	}()
	p.cmd, p.done = cmd, done
	return nil
}

// Restarts counts the restarts after exits on its own (supervised only).
func (p *Proc) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// PID is the process's ID while it runs, else 0.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// halt marks the process stopped (no restart after it) and returns it.
func (p *Proc) halt() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	return p.cmd, p.done
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it;
// a supervised one is not restarted until Start.
func (p *Proc) Kill() {
	GinkgoHelper()
	cmd, done := p.halt()
	Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed(), "kill %s", p.Name)
	<-done
}

// Stop ends the process with SIGTERM (it then removes what it made), or
// SIGKILL after 30 s.
func (p *Proc) Stop(ctx context.Context) {
	cmd, done := p.halt()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		Fail(fmt.Sprintf("%s did not stop within 30s of SIGTERM; its log: %s", p.Name, p.log))
	case <-ctx.Done():
	}
}

// Log is the process's output so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}
