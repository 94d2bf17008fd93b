package offload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferry-io/ferry/test/testbed"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		stat  string
		ppid  int
		state string
		ok    bool
	}{
		{"4242 (ferry-virtual-) S 4200 4242 1 0 -1", 4200, "S", true},
		{"17 (a) b (c)) Z 9 17 1", 9, "Z", true}, // a command with spaces and parentheses
		{"17 (broken", 0, "", false},
		{"17 (x) R", 0, "", false},
		{"17 (x) R notanumber", 0, "", false},
	} {
		ppid, state, ok := parseStat(tc.stat)
		if ppid != tc.ppid || state != tc.state || ok != tc.ok {
			t.Errorf("parseStat(%q) = %d, %q, %t; want %d, %q, %t", tc.stat, ppid, state, ok, tc.ppid, tc.state, tc.ok)
		}
	}
}

func TestVirtualNodeArg(t *testing.T) {
	for args, want := range map[string][]string{
		"ferry-provider": {"ferry-virtual-kubelet", "--kubeconfig=x", "--virtual-node-name=ferry-provider", ""},
		"other":          {"ferry-virtual-kubelet", "--virtual-node-name", "other"},
		"":               {"ferry-virtual-kubelet", "--virtual-node-namespace=ferry-system", "--virtual-node-name"},
	} {
		if got := virtualNodeArg(want); got != args {
			t.Errorf("virtualNodeArg(%q) = %q, want %q", want, got, args)
		}
	}
}

// childVirtualKubelets finds this process's children that serve a virtual
// node, and no longer one that has been killed.
func TestChildVirtualKubelets(t *testing.T) {
	// The shell stays (two commands), its arguments after the script being
	// $0 and $1: a stand-in with a virtual kubelet's command line.
	vk := exec.Command("/bin/sh", "-c", "sleep 30; true", "ferry-virtual-kubelet", "--virtual-node-name=ferry-provider-1")
	other := exec.Command("/bin/sh", "-c", "sleep 30; true", "something-else")
	for _, c := range []*exec.Cmd{vk, other} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	got := childVirtualKubelets(os.Getpid())
	if len(got) != 1 || got["ferry-provider-1"] != vk.Process.Pid {
		t.Fatalf("childVirtualKubelets = %v, want only ferry-provider-1: %d", got, vk.Process.Pid)
	}
	if err := vk.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed but not yet reaped, it is a zombie: no longer running.
	if err := waitGone(got, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := childVirtualKubelets(os.Getpid()); len(got) != 0 {
		t.Fatalf("childVirtualKubelets after the kill = %v, want none", got)
	}
}

// TestMain lets the test binary stand in for ferry-controller-manager
// (FERRY_BENCH_FAKE_CM=1): see fakeControllerManager.
func TestMain(m *testing.M) {
	if os.Getenv("FERRY_BENCH_FAKE_CM") == "1" {
		fakeControllerManager(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

// fakeControllerManager answers /readyz on --health-probe-bind-address and
// runs one child with a virtual kubelet's command line, which the kernel
// kills with it; on SIGTERM it stops the child first, as the launcher does.
func fakeControllerManager(args []string) {
	if _, err := os.Stat(os.Getenv("FERRY_BENCH_FAKE_CM_FAIL")); err == nil {
		os.Exit(1) // as when its API server is down
	}
	var health string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			health = v
		}
	}
	vk := exec.Command("/bin/sh", "-c", "sleep 60; true", "ferry-virtual-kubelet", "--virtual-node-name=ferry-fake")
	vk.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := vk.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	go func() { _ = http.ListenAndServe(health, nil) }()
	<-terms
	_ = vk.Process.Kill()
	_ = vk.Wait()
}

// A ferryProcess starts, answers, shows its virtual kubelet, and both go
// on Kill and on Stop; it starts again after either. Killed from outside,
// it is started again, also after failed starts.
func TestFerryProcessLifecycle(t *testing.T) {
	t.Setenv("FERRY_BENCH_FAKE_CM", "1")
	fail := filepath.Join(t.TempDir(), "fail")
	t.Setenv("FERRY_BENCH_FAKE_CM_FAIL", fail)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &testbed.Cluster{Name: "fake", Dir: t.TempDir(), KubeconfigPath: "/dev/null"}
	p, err := startFerryProcess(t.Context(), c, "fake", ferryBinaries{ControllerManager: self, VirtualKubelet: "/bin/false"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	if !strings.HasPrefix(p.MetricsURL(), "http://127.0.0.1:") || !strings.HasSuffix(p.MetricsURL(), "/metrics") {
		t.Errorf("MetricsURL() = %q, want http://127.0.0.1:<port>/metrics", p.MetricsURL())
	}
	// Killed from outside, it is started again, as its Deployment would
	// be, even though its first new starts fail.
	if err := os.WriteFile(fail, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	first := p.PID()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := poll(t.Context(), 10*time.Second, "two failed starts", func(context.Context) (bool, error) {
		return p.Exits() >= 3, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	if err := poll(t.Context(), 30*time.Second, "the controller manager started again", func(context.Context) (bool, error) {
		return p.PID() != 0 && len(p.VirtualKubeletPIDs()) == 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	exits := p.Exits()
	for round, end := range map[string]func() error{"kill": p.Kill, "stop": p.Stop} {
		var vks map[string]int
		if err := poll(t.Context(), 5*time.Second, "the fake virtual kubelet", func(context.Context) (bool, error) {
			vks = p.VirtualKubeletPIDs()
			return vks["ferry-fake"] != 0, nil
		}); err != nil {
			t.Fatal(err)
		}
		cm := p.PID()
		if err := p.Start(t.Context()); err == nil {
			t.Fatalf("Start while it runs succeeded, want an error")
		}
		if err := end(); err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		if alive(cm) || alive(vks["ferry-fake"]) || p.PID() != 0 {
			t.Fatalf("after %s: controller manager %d alive %t, virtual kubelet %d alive %t, PID() %d", round, cm, alive(cm), vks["ferry-fake"], alive(vks["ferry-fake"]), p.PID())
		}
		if err := end(); err != nil {
			t.Fatalf("second %s: %v", round, err)
		}
		time.Sleep(2 * supervisorDelay) // a restart would show by now
		if p.PID() != 0 || p.Exits() != exits {
			t.Fatalf("after %s: PID() %d, Exits() %d; want it to stay down, not counted as exiting on its own (%d before)", round, p.PID(), p.Exits(), exits)
		}
		if err := p.Start(t.Context()); err != nil {
			t.Fatalf("Start after %s: %v", round, err)
		}
		if p.PID() == 0 || p.PID() == cm {
			t.Fatalf("after Start, PID() = %d (was %d), want a new process", p.PID(), cm)
		}
	}
}

// buildFerryBinaries builds both programs, which then run (-version).
func TestBuildFerryBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	b, remove, err := buildFerryBinaries(t.Context(), "../../..")
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	for _, bin := range []string{b.ControllerManager, b.VirtualKubelet} {
		if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
			t.Errorf("%s --version: %v\n%s", bin, err, out)
		}
	}
}
