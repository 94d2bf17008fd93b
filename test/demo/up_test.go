package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeDaemonEnv makes this test binary, run as "<test binary> daemon",
// stand for a running demo daemon: it only sleeps.
const fakeDaemonEnv = "FERRY_DEMO_TEST_FAKE_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(fakeDaemonEnv) != "" {
		time.Sleep(2 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestUpRefusesWhileADemoRunsInItsFolder(t *testing.T) {
	dir := t.TempDir()
	daemon := exec.Command(os.Args[0], daemonCommand)
	daemon.Env = append(os.Environ(), fakeDaemonEnv+"=1")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = daemon.Wait(); close(exited) }()
	t.Cleanup(func() { _ = daemon.Process.Kill(); <-exited })
	pid := daemon.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, readyFile), []byte(`{"pid":1}`), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := Up(ctx, Config{StateDir: dir, BinDir: t.TempDir(), RepoRoot: t.TempDir()}, &out)
	if err == nil {
		t.Fatalf("up started a second demo in %s; output:\n%s", dir, out.String())
	}
	for _, want := range []string{"already running in " + dir, "daemon PID " + strconv.Itoa(pid), "make demo-down DEMO_FLAGS='--dir " + dir + "'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	select {
	case <-exited:
		t.Fatal("up stopped the running demo's daemon")
	default:
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the running demo's daemon: %v", err)
	}
	for _, f := range []string{pidFile, readyFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("up removed the running demo's %s: %v", f, err)
		}
	}
}

func TestUpRefusesWhileAnotherUpHoldsTheFolder(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockForUp(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	err = Up(context.Background(), Config{StateDir: dir, BinDir: t.TempDir(), RepoRoot: t.TempDir()}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "another ferry-demo up is starting a demo in "+dir) {
		t.Fatalf("up beside another up: %v", err)
	}
	// Released, the folder is free again.
	_ = lock.Close()
	lock, err = lockForUp(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	_ = lock.Close()
}

func TestRefusalSaysHowToStopTheRunningDemo(t *testing.T) {
	def, err := filepath.Abs(defaultDir)
	if err != nil {
		t.Fatal(err)
	}
	if msg := (errRunning{dir: def, pid: 42}).Error(); !strings.Contains(msg, "daemon PID 42); stop it with `make demo-down`,") {
		t.Errorf("default folder: %q, want plain make demo-down", msg)
	}
	if msg := (errRunning{dir: "/tmp/other", pid: 42}).Error(); !strings.Contains(msg, "stop it with `make demo-down DEMO_FLAGS='--dir /tmp/other'`") {
		t.Errorf("another folder: %q, want make demo-down with its --dir", msg)
	}
}
