package peering

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
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
