package crashloop

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sleeper(t *testing.T) *Process {
	return &Process{Name: "sleep", Binary: "sleep", Args: []string{"60"}, LogPath: filepath.Join(t.TempDir(), "sleep.log"),
		Restart: true, BackOff: 50 * time.Millisecond}
}

func TestProcessThatExitsOnItsOwnIsRestartedWithBackOff(t *testing.T) {
	p := sleeper(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	first := p.PID()
	if first == 0 || p.State().Phase != PhaseRunning {
		t.Fatalf("after Start: PID %d, state %+v", first, p.State())
	}
	for i := 1; i <= 2; i++ {
		pid := p.PID()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // a crash, not Kill
			t.Fatal(err)
		}
		waitFor(t, "restart", func() bool { return p.Restarts() == i && p.PID() != 0 })
		if p.PID() == pid {
			t.Fatalf("restart %d: same PID %d", i, pid)
		}
		if s := p.State(); s.Phase != PhaseRunning || s.LastExit != "signal: killed" {
			t.Errorf("restart %d: state %+v, want Running after a run ended by signal: killed", i, s)
		}
	}
}

func TestProcessInBackOffReportsIt(t *testing.T) {
	p := sleeper(t)
	p.BackOff = time.Hour
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "back-off", func() bool { return p.State().Phase == PhaseBackOff })
	if s := p.State(); s.PID != 0 || time.Until(s.RestartAt) < 50*time.Minute {
		t.Errorf("state %+v: want no PID and a restart in about an hour", s)
	}
	// Stop ends the wait: no restart, state Exited.
	p.Stop(time.Second)
	if s := p.State(); s.Phase != PhaseExited {
		t.Errorf("after Stop: state %+v, want Exited", s)
	}
}

func TestKilledOrStoppedProcessIsNotRestarted(t *testing.T) {
	for name, end := range map[string]func(*Process){
		"Kill": func(p *Process) {
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
		},
		"Stop": func(p *Process) {
			if !p.Stop(10 * time.Second) {
				t.Error("sleep did not end on SIGTERM")
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := sleeper(t)
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			end(p)
			time.Sleep(10 * p.BackOff)
			if p.PID() != 0 || p.Restarts() != 0 {
				t.Fatalf("after %s: PID %d, %d restarts; want none", name, p.PID(), p.Restarts())
			}
			// Start brings it back.
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			defer p.Stop(time.Second)
			if p.PID() == 0 {
				t.Fatal("not running after Start")
			}
		})
	}
}

func TestUnsupervisedProcessStaysExited(t *testing.T) {
	p := sleeper(t)
	p.Restart = false
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	time.Sleep(10 * p.BackOff)
	if s := p.State(); s.Phase != PhaseExited || p.Restarts() != 0 {
		t.Errorf("state %+v: want Exited, no restart", s)
	}
}
