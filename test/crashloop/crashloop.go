// Package crashloop runs a program as the kubelet runs a container with
// restartPolicy Always: when it exits on its own it is started again after
// the kubelet's crash-loop back-off (10 s, doubling up to 5 min, back to
// 10 s once a run lasted 10 min). The e2e framework's processes and the
// demo's components both run this way, so a test or a user can kill one
// and watch it come back, as in a cluster.
package crashloop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// The kubelet's crash-loop back-off (pkg/kubelet: initial 10 s, doubling,
// capped at 5 min, reset after 10 min of running).
const (
	InitialBackOff = 10 * time.Second
	MaxBackOff     = 5 * time.Minute
	resetAfter     = 10 * time.Minute
)

// Process is one program, its output appended to LogPath. Set the exported
// fields before Start and leave them alone after.
type Process struct {
	// Name shows in log lines.
	Name string
	// Binary and Args are the command line.
	Binary string
	Args   []string
	// LogPath receives the program's stdout and stderr, appended run after run.
	LogPath string
	// Restart starts the program again when it exits on its own (not by
	// Kill or Stop), after the back-off.
	Restart bool
	// BackOff is the first restart delay (InitialBackOff when zero); it
	// doubles at each restart, up to MaxBackOff.
	BackOff time.Duration
	// Logger gets a line when the program exits on its own and when it is
	// restarted.
	Logger logr.Logger
	// SysProcAttr is the child's; when nil, it gets its own process group
	// (a Ctrl-C reaches its owner, which stops it in order) and dies with
	// its owner (parent-death signal SIGKILL).
	SysProcAttr *syscall.SysProcAttr

	mu         sync.Mutex
	restarts   int
	stopped    bool // by Kill or Stop: not restarted
	cmd        *exec.Cmd
	done       chan struct{}
	restartAt  time.Time // when a restart is pending, its time
	lastStatus string    // how the last run ended
}

// Start runs the program (again, after Kill or Stop), resetting the back-off.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = false
	return p.startLocked(p.initialBackOff())
}

func (p *Process) initialBackOff() time.Duration {
	if p.BackOff > 0 {
		return p.BackOff
	}
	return InitialBackOff
}

func (p *Process) startLocked(backOff time.Duration) error {
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = p.SysProcAttr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	started := time.Now()
	p.cmd, p.done, p.restartAt = cmd, done, time.Time{}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
		p.exited(cmd, started, backOff)
	}()
	return nil
}

// exited schedules the restart of a run that ended on its own.
func (p *Process) exited(cmd *exec.Cmd, started time.Time, backOff time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != cmd {
		return
	}
	p.lastStatus = cmd.ProcessState.String()
	if !p.Restart || p.stopped {
		return
	}
	if time.Since(started) > resetAfter { // it ran fine: the kubelet resets its back-off
		backOff = p.initialBackOff()
	}
	p.restartAt = time.Now().Add(backOff)
	p.Logger.Info("Process exited; restarting it after back-off", "process", p.Name, "pid", cmd.Process.Pid,
		"status", p.lastStatus, "backOff", backOff, "restarts", p.restarts)
	time.AfterFunc(backOff, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.stopped || p.cmd != cmd {
			return
		}
		p.restarts++
		if err := p.startLocked(min(2*backOff, MaxBackOff)); err != nil {
			p.Logger.Error(err, "Restart failed; not trying again", "process", p.Name)
			return
		}
		p.Logger.Info("Process restarted", "process", p.Name, "pid", p.cmd.Process.Pid, "restarts", p.restarts)
	})
}

// Restarts counts the restarts after exits on its own.
func (p *Process) Restarts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// PID is the program's process ID while it runs, else 0.
func (p *Process) PID() int { return p.State().PID }

// Exited is closed when the current run ends (nil before Start).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// State says whether the program runs, waits for its restart (and until
// when), or was stopped, and how its last run ended.
func (p *Process) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := State{Restarts: p.restarts, LastExit: p.lastStatus}
	switch {
	case p.cmd == nil:
		s.Phase = PhaseNotStarted
	case !isDone(p.done):
		s.Phase, s.PID = PhaseRunning, p.cmd.Process.Pid
	case !p.restartAt.IsZero() && !p.stopped:
		s.Phase, s.RestartAt = PhaseBackOff, p.restartAt
	default:
		s.Phase = PhaseExited
	}
	return s
}

// State is a snapshot of a Process.
type State struct {
	Phase     Phase     `json:"phase"`
	PID       int       `json:"pid,omitempty"`
	Restarts  int       `json:"restarts"`
	RestartAt time.Time `json:"restartAt,omitzero"`
	LastExit  string    `json:"lastExit,omitempty"`
}

// Phase is where a Process is in its life.
type Phase string

// The phases of a Process.
const (
	PhaseNotStarted Phase = "NotStarted"
	PhaseRunning    Phase = "Running"
	// PhaseBackOff: it exited on its own and waits for its restart, as a
	// container in CrashLoopBackOff.
	PhaseBackOff Phase = "CrashLoopBackOff"
	PhaseExited  Phase = "Exited"
)

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// halt marks the process stopped (no restart after it) and returns its
// current run.
func (p *Process) halt() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.restartAt = time.Time{}
	return p.cmd, p.done
}

// Kill ends the program with SIGKILL, as a crash would, and waits for it;
// it is not restarted until Start.
func (p *Process) Kill() error {
	cmd, done := p.halt()
	if cmd == nil || isDone(done) {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", p.Name, err)
	}
	<-done
	return nil
}

// Stop ends the program with SIGTERM, or SIGKILL after grace, and waits
// for it; it is not restarted until Start. It reports whether the program
// ended within grace.
func (p *Process) Stop(grace time.Duration) bool {
	cmd, done := p.halt()
	if cmd == nil || isDone(done) {
		return true
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return true
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		return false
	}
}
