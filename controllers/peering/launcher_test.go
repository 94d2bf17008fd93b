package peering

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// fakeVirtualKubelet is a stand-in binary that records its arguments and
// runs until killed.
func fakeVirtualKubelet(t *testing.T) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	bin = filepath.Join(dir, "ferry-virtual-kubelet")
	script := "#!/bin/sh\necho \"$@\" >> " + argsFile + "\nexec sleep 600\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestProcessLauncherRunsOneProcessPerVirtualNode(t *testing.T) {
	bin, argsFile := fakeVirtualKubelet(t)
	l := &ProcessLauncher{Binary: bin, Kubeconfig: "/etc/consumer.kubeconfig", LogDir: t.TempDir(), ExtraArgs: []string{"--health-check-period=5s"}}
	vn := types.NamespacedName{Namespace: "ferry-system", Name: "ferry-provider"}
	t.Cleanup(func() { _ = l.Remove(context.Background(), vn) })
	for range 3 { // idempotent: one process however often it is ensured
		if err := l.Ensure(t.Context(), vn); err != nil {
			t.Fatal(err)
		}
	}
	var args string
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		data, _ := os.ReadFile(argsFile)
		args = string(data)
		return args != "", nil
	}); err != nil {
		t.Fatal("the virtual kubelet process did not start")
	}
	want := "--kubeconfig=/etc/consumer.kubeconfig --virtual-node-namespace=ferry-system --virtual-node-name=ferry-provider --kubelet-address=127.0.0.1:0 --health-check-period=5s\n"
	if args != want {
		t.Fatalf("started with %q, want exactly one start with %q", args, want)
	}
	pid := l.running[vn].cmd.Process.Pid

	if err := l.Remove(t.Context(), vn); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(stat), ") Z") {
			t.Fatalf("process %d still runs after Remove", pid)
		}
	}
	if err := l.Remove(t.Context(), vn); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

func TestFuncLauncherRestartsAnEndedVirtualKubelet(t *testing.T) {
	var starts atomic.Int32
	l := &FuncLauncher{Run: func(ctx context.Context, _ types.NamespacedName) error {
		if starts.Add(1) == 1 {
			return nil // the first one ends on its own
		}
		<-ctx.Done()
		return nil
	}}
	vn := types.NamespacedName{Namespace: "ferry-system", Name: "ferry-provider"}
	if err := l.Ensure(t.Context(), vn); err != nil {
		t.Fatal(err)
	}
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-l.running[vn].done:
			return true, nil
		default:
			return false, nil
		}
	})
	for range 3 {
		if err := l.Ensure(t.Context(), vn); err != nil {
			t.Fatal(err)
		}
	}
	_ = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return starts.Load() >= 2, nil
	})
	time.Sleep(100 * time.Millisecond) // a third start would show by now
	if got := starts.Load(); got != 2 {
		t.Fatalf("started %d times, want 2 (once, and once after it ended)", got)
	}
	l.StopAll()
}

// A virtual kubelet process killed from outside is started again by the
// launcher itself, without waiting for the next Ensure (the peering round);
// one removed is not.
func TestProcessLauncherRestartsAKilledVirtualKubelet(t *testing.T) {
	bin, argsFile := fakeVirtualKubelet(t)
	l := &ProcessLauncher{Binary: bin, Kubeconfig: "/etc/consumer.kubeconfig", LogDir: t.TempDir()}
	vn := types.NamespacedName{Namespace: "ferry-system", Name: "ferry-provider"}
	t.Cleanup(func() { l.StopAll(context.Background()) })
	// starts waits until the fake virtual kubelet has started n times.
	starts := func(n int) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			data, _ := os.ReadFile(argsFile)
			return strings.Count(string(data), "\n") >= n, nil
		}); err != nil {
			data, _ := os.ReadFile(argsFile)
			t.Fatalf("virtual kubelet started %d times, want %d:\n%s", strings.Count(string(data), "\n"), n, data)
		}
	}
	if err := l.Ensure(t.Context(), vn); err != nil {
		t.Fatal(err)
	}
	starts(1)
	first := l.PID(vn)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var second int
	if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		second = l.PID(vn)
		return second != 0 && second != first, nil
	}); err != nil {
		t.Fatalf("the killed virtual kubelet (pid %d) was not started again: PID %d", first, l.PID(vn))
	}
	starts(2)

	if err := l.Remove(t.Context(), vn); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * restartDelay) // a restart after Remove would show by now
	if pid := l.PID(vn); pid != 0 {
		t.Fatalf("virtual kubelet started again (pid %d) after Remove", pid)
	}
	if data, _ := os.ReadFile(argsFile); strings.Count(string(data), "\n") != 2 {
		t.Fatalf("virtual kubelet started %d times, want 2 (once, and once after the kill):\n%s", strings.Count(string(data), "\n"), data)
	}
}

func TestBackoff(t *testing.T) {
	for quickExits, want := range map[int]time.Duration{0: time.Second, 1: 2 * time.Second, 3: 8 * time.Second, 6: time.Minute, 1000: time.Minute} {
		if got := backoff(quickExits); got != want {
			t.Errorf("backoff(%d) = %s, want %s", quickExits, got, want)
		}
	}
}
