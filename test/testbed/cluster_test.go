package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

const helperEnv = "FERRY_TESTBED_HELPER"

// TestMain lets the test binary act as a test process that starts a cluster
// and is then killed, for TestClusterDiesWithKilledTestProcess.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		c, err := Start(context.Background(), Options{Name: "orphan", ControllerManager: true, Scheduler: true, Kwok: true})
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"pids": c.PIDs(), "dir": c.Dir})
		time.Sleep(time.Hour) // until killed
	}
	os.Exit(m.Run())
}

// A test process killed with SIGKILL cannot clean up; the parent-death signal
// must still end every program its clusters started, and the next run must
// remove the folder left behind.
func TestClusterDiesWithKilledTestProcess(t *testing.T) {
	RequireBinaries(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var report struct {
		PIDs map[string]int `json:"pids"`
		Dir  string         `json:"dir"`
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper did not report its cluster: %v", err)
	}
	if err := json.Unmarshal(line, &report); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper report %q: %v", line, err)
	}
	want := []string{binaries.Etcd, binaries.KubeAPIServer, binaries.KubeControllerManager, binaries.KubeScheduler, binaries.Kwok}
	for _, name := range want {
		if report.PIDs[name] == 0 || !processAlive(report.PIDs[name]) {
			_ = cmd.Process.Kill()
			t.Fatalf("%s is not running in the helper's cluster: %v", name, report.PIDs)
		}
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for name, pid := range report.PIDs {
		for processRunning(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if processRunning(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // do not leak it from the test either
			t.Errorf("%s (pid %d) outlived the killed test process", name, pid)
		}
	}

	reapOnce = sync.Once{}
	reapStaleClusterDirs()
	if _, err := os.Stat(report.Dir); !os.IsNotExist(err) {
		_ = os.RemoveAll(report.Dir)
		t.Errorf("folder %s of the dead test process was not reaped (stat: %v)", report.Dir, err)
	}
}

// processRunning is processAlive minus zombies: a killed child of init may
// linger as a zombie until reaped, which is not "running".
func processRunning(pid int) bool {
	if !processAlive(pid) {
		return false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestStopEndsEveryProcessAndRemovesTheFolder(t *testing.T) {
	RequireBinaries(t)
	c, err := Start(t.Context(), Options{Name: "stop", ControllerManager: true, Scheduler: true, Nodes: []NodePool{{Name: "n", Count: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	pids := c.PIDs()
	names := make([]string, 0, len(pids))
	for name := range pids {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}; !slices.Equal(names, want) {
		t.Fatalf("cluster runs %v, want %v", names, want)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if processRunning(pid) {
			t.Errorf("%s (pid %d) still runs after Stop", name, pid)
		}
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("folder %s still exists after Stop (stat: %v)", c.Dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestNodePoolRejectsBadQuantities(t *testing.T) {
	_, err := NodePool{Name: "p", CPU: "eight"}.nodes()
	if err == nil || !strings.Contains(err.Error(), "cpu") || !strings.Contains(err.Error(), "eight") {
		t.Fatalf("bad cpu quantity: %v, want an error naming cpu and the value", err)
	}
	if _, err := (NodePool{}).nodes(); err == nil {
		t.Fatal("a pool without a name was accepted")
	}
}

func TestFirstServiceIP(t *testing.T) {
	ip, err := firstServiceIP("10.96.0.0/16")
	if err != nil || ip.String() != "10.96.0.1" {
		t.Fatalf("firstServiceIP(10.96.0.0/16) = %v, %v", ip, err)
	}
	if _, err := firstServiceIP("10.96.0.0"); err == nil || !strings.Contains(err.Error(), "serviceCIDR") {
		t.Fatalf("bad CIDR: %v, want an error naming serviceCIDR", err)
	}
}

func TestAPIServerOutageAndReturnKeepsTheData(t *testing.T) {
	RequireBinaries(t)
	c, err := Start(t.Context(), Options{Name: "outage"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "survives"}}
	if _, err := c.Kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.StopAPIServer()
	if _, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), "survives", metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered while stopped")
	}
	if err := c.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kube.CoreV1().Namespaces().Get(t.Context(), "survives", metav1.GetOptions{}); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if err := c.StartAPIServer(t.Context()); err == nil {
		t.Fatal("starting a running API server twice was accepted")
	}
}
