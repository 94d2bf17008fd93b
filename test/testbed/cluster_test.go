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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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

// TestKwokResizesLabelledPodsInPlace: a kwok pod labelled KwokResizeLabel
// reports its containers' resources, so the API server accepts a resize of
// it, and then reports the new ones; an unlabelled pod reports none and its
// resize is refused, as kwok v0.8.0 alone does.
func TestKwokResizesLabelledPodsInPlace(t *testing.T) {
	RequireBinaries(t)
	ctx := t.Context()
	c, err := Start(ctx, Options{Name: "resize", Kwok: true, Nodes: []NodePool{{Name: "n", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	// No controller manager here to make it.
	if _, err := c.Kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
			Spec: corev1.PodSpec{NodeName: "n-0", Containers: []corev1.Container{{Name: "app", Image: "app", Resources: cpu("100m")}}}}
		p, err := c.Kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	running := func(p *corev1.Pod, want string) *corev1.Pod {
		t.Helper()
		var got *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			if got, err = c.Kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
				return false, err
			}
			if got.Status.Phase != corev1.PodRunning || len(got.Status.ContainerStatuses) != 1 {
				return false, nil
			}
			r := got.Status.ContainerStatuses[0].Resources
			if want == "" {
				return r == nil, nil
			}
			return r != nil && r.Requests.Cpu().Cmp(resource.MustParse(want)) == 0 && r.Limits.Cpu().Cmp(resource.MustParse(want)) == 0 &&
				got.Status.ContainerStatuses[0].AllocatedResources.Cpu().Cmp(resource.MustParse(want)) == 0, nil
		})
		if err != nil {
			t.Fatalf("pod %s running with %q CPU in its container status: %v (status %+v)\n%s", p.Name, want, err, got.Status, c.Logs(30))
		}
		return got
	}
	resized := running(pod("resizable", map[string]string{KwokResizeLabel: "true"}), "100m")
	resized.Spec.Containers[0].Resources = cpu("200m")
	if _, err := c.Kube.CoreV1().Pods("default").UpdateResize(ctx, resized.Name, resized, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("resize of a labelled pod: %v", err)
	}
	running(resized, "200m")

	plain := running(pod("plain", nil), "")
	plain.Spec.Containers[0].Resources = cpu("200m")
	if _, err := c.Kube.CoreV1().Pods("default").UpdateResize(ctx, plain.Name, plain, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "without support for resize") {
		t.Errorf("resize of an unlabelled kwok pod: %v, want the API server's refusal", err)
	}
}
