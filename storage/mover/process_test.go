package mover

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The process tests run the program as the image does: this test binary,
// started again with FERRY_MOVER_MAIN=1, is ferry-volume-mover.
func TestMain(m *testing.M) {
	if os.Getenv("FERRY_MOVER_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	done           chan struct{}
	err            error
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

func startProcEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), done: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), "FERRY_MOVER_MAIN=1", TokenEnv+"="), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], p.stderr.Bytes())
		}
	})
	return p
}

// wait returns the exit code, failing t after a minute.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not exit; stderr:\n%s", p.cmd.Args[1], p.stderr.Bytes())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

var listening = regexp.MustCompile(`address=(127\.0\.0\.1:[0-9]+)`)

// address waits for the process to log the address it listens on.
func (p *proc) address(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindSubmatch(p.stderr.Bytes()); m != nil {
			return string(m[1])
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v\n%s", p.cmd.Args[1], p.err, p.stderr.Bytes())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s never listened:\n%s", p.cmd.Args[1], p.stderr.Bytes())
	return ""
}

func progressLines(t *testing.T, out []byte) []Progress {
	t.Helper()
	var lines []Progress
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		p, err := ParseProgress(sc.Bytes())
		if err != nil {
			t.Fatalf("stdout holds a line that is not progress: %v", err)
		}
		lines = append(lines, p)
	}
	return lines
}

func TestProcessFetchKilledMidCopyThenRerunSucceeds(t *testing.T) {
	src, dst, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	makeTree(t, src, 32<<20)
	want, err := TreeDigest(src)
	if err != nil {
		t.Fatal(err)
	}
	// With a token on both sides.
	token := []string{TokenEnv + "=s3cret"}
	serve := startProcEnv(t, token, "serve", "--dir="+src, "--listen=127.0.0.1:0")
	addr := serve.address(t)
	stall := startCutter(t, addr, 8<<20, true)
	term := filepath.Join(tmp, "termination-log")
	fetch := startProcEnv(t, token, "fetch", "--dir="+dst, "--from="+stall.addr(), "--termination-log="+term)
	select {
	case <-stall.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the copy never got going")
	}
	if err := fetch.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if code := fetch.wait(t); code != -1 {
		t.Fatalf("killed fetch exited %d", code)
	}
	if got, err := TreeDigest(dst); err != nil || got.SHA256 == want.SHA256 || got.Bytes >= want.Bytes {
		t.Fatalf("a fetch killed mid-copy left %+v (%v), want less than the source %+v", got, err, want)
	}
	if _, err := os.Stat(term); !os.IsNotExist(err) {
		t.Fatalf("a killed fetch wrote its termination log: %v", err)
	}
	stall.release()

	// Without the token: refused at once, nothing copied.
	refused := startProc(t, "fetch", "--dir="+dst, "--from="+addr, "--termination-log="+term, "--connect-timeout=1m")
	if code := refused.wait(t); code != 1 {
		t.Fatalf("fetch without the token exited %d", code)
	}
	if msg, _ := os.ReadFile(term); !strings.Contains(string(msg), "401") || !strings.Contains(string(msg), TokenEnv) {
		t.Fatalf("termination log of a fetch without the token: %q", msg)
	}

	again := startProcEnv(t, token, "fetch", "--dir="+dst, "--from="+addr, "--termination-log="+term)
	if code := again.wait(t); code != 0 {
		t.Fatalf("rerun exited %d:\n%s", code, again.stderr.Bytes())
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParseTerminationMessage(string(msg))
	if err != nil || res.SHA256 != want.SHA256 || res.Bytes != want.Bytes || res.Files != want.Files {
		t.Fatalf("termination log %q: %+v %v, want %+v", msg, res, err, want)
	}
	compareTrees(t, src, dst)
	lines := progressLines(t, again.stdout.Bytes())
	if len(lines) == 0 || lines[len(lines)-1].Bytes != want.Bytes {
		t.Fatalf("progress lines %+v, want the last at %d bytes", lines, want.Bytes)
	}

	if err := serve.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := serve.wait(t); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM", code)
	}
}

func TestProcessServeKilledMidCopyFailsTheFetch(t *testing.T) {
	src, dst, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	makeTree(t, src, 32<<20)
	serve := startProc(t, "serve", "--dir="+src, "--listen=127.0.0.1:0")
	relay := startProc(t, "relay", "--listen=127.0.0.1:0", "--to="+serve.address(t))
	stall := startCutter(t, relay.address(t), 8<<20, true)
	term := filepath.Join(tmp, "termination-log")
	fetch := startProc(t, "fetch", "--dir="+dst, "--from="+stall.addr(), "--termination-log="+term)
	select {
	case <-stall.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the copy never got going")
	}
	if err := serve.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	serve.wait(t)
	stall.release()
	if code := fetch.wait(t); code != 1 {
		t.Fatalf("fetch whose source was killed exited %d", code)
	}
	msg, err := os.ReadFile(term)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ParseTerminationMessage(string(msg))
	var failed *FailedError
	if !errors.As(err, &failed) || strings.Contains(string(msg), "\n") || !strings.Contains(string(msg), "copy from") {
		t.Fatalf("termination log %q: %v, want one line saying why", msg, err)
	}
	t.Logf("termination log: %s", msg)
	if err := relay.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := relay.wait(t); code != 0 {
		t.Fatalf("relay exited %d on SIGTERM", code)
	}
}

func TestProcessUsageErrors(t *testing.T) {
	tmp := t.TempDir()
	term := filepath.Join(tmp, "termination-log")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{}, 2},
		{[]string{"copy"}, 2},
		{[]string{"serve"}, 2},
		{[]string{"relay", "--listen=127.0.0.1:0"}, 2},
		{[]string{"fetch", "--dir=" + tmp, "--termination-log=" + term}, 2},
		{[]string{"fetch", "--dir=" + filepath.Join(tmp, "missing"), "--from=127.0.0.1:1", "--termination-log=" + term}, 1},
		{[]string{"serve", "--dir=" + tmp, "--listen=256.0.0.1:1"}, 1},
		{[]string{"--version"}, 0},
	} {
		p := startProc(t, tc.args...)
		if code := p.wait(t); code != tc.code {
			t.Errorf("%q exited %d, want %d:\n%s", tc.args, code, tc.code, p.stderr.Bytes())
		}
	}
	msg, _ := os.ReadFile(term)
	if !strings.Contains(string(msg), "--dir") {
		t.Errorf("termination log of a fetch without its directory: %q", msg)
	}
}
