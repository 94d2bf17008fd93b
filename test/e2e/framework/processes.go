package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/testbed"
)

// BuildBinary builds cmd/<name> (ferry-controller-manager, ferry-webhook,
// ...) into a folder removed when the suite ends, and returns its path.
func BuildBinary(ctx context.Context, name string) string {
	GinkgoHelper()
	return buildBinary(ctx, name)
}

// StartControllerManagerProcess runs ferry-controller-manager for c as a
// process, as it runs in a cluster: leader election on, restarted with the
// kubelet's backoff when it exits on its own (as it does when it cannot
// renew its lease). Its virtual kubelets are processes of vkBinary (they die
// with it); vkArgs are passed to every virtual kubelet.
func StartControllerManagerProcess(ctx context.Context, bin, vkBinary string, c *testbed.Cluster, id ferryv1alpha1.ClusterID, vkArgs ...string) *Proc {
	GinkgoHelper()
	args := []string{"--kubeconfig=" + c.KubeconfigPath, "--cluster-id=" + string(id), "--pod-cidr=" + c.PodCIDR(),
		"--virtual-kubelet-mode=process", "--virtual-kubelet-binary=" + vkBinary, "--virtual-kubelet-log-dir=" + c.Dir,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--grant-debounce=300ms", "-v=2"}
	for _, a := range vkArgs {
		args = append(args, "--virtual-kubelet-arg="+a)
	}
	p := newProc("controller-manager-"+c.Name, bin, filepath.Join(c.Dir, "ferry-controller-manager.log"), args, true)
	p.Start()
	DeferCleanup(p.Stop, NodeTimeout(time.Minute))
	Eventually(func() error { // it records the cluster ID first thing
		return c.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: ferryv1alpha1.ClusterIdentityConfigMap}, &corev1.ConfigMap{})
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "%s did not start; its log:\n%s", p.Name, p.Log())
	return p
}

// WebhookProc is ferry-webhook run for a test-bed cluster as a process on
// 127.0.0.1, its configurations pointing there.
type WebhookProc struct {
	*Proc
	health int
}

// StartWebhookProcess installs the webhook configurations of c pointing at
// a free local port and runs ferry-webhook there, waiting until it serves.
func StartWebhookProcess(ctx context.Context, bin string, c *testbed.Cluster) *WebhookProc {
	GinkgoHelper()
	port, health, err := localwebhook.Ports()
	Expect(err).NotTo(HaveOccurred())
	Expect(localwebhook.Install(ctx, c.Client, RepoRoot(), fmt.Sprintf("https://127.0.0.1:%d", port))).To(Succeed())
	w := &WebhookProc{health: health, Proc: newProc("webhook-"+c.Name, bin, filepath.Join(c.Dir, "ferry-webhook.log"),
		[]string{"--kubeconfig=" + c.KubeconfigPath, "--bind-address=127.0.0.1", fmt.Sprintf("--port=%d", port),
			"--cert-dns-names=localhost", "--cert-ip-addresses=127.0.0.1", "--metrics-bind-address=0",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health)}, false)}
	w.Restart(ctx)
	DeferCleanup(w.Stop, NodeTimeout(time.Minute))
	return w
}

// Restart starts the webhook (again) and waits until it serves.
func (w *WebhookProc) Restart(ctx context.Context) {
	GinkgoHelper()
	w.Start()
	Expect(localwebhook.WaitReady(ctx, w.health, time.Minute)).To(Succeed(), "%s; its log:\n%s", w.Name, w.Log())
}

// Children are the PIDs of the running processes whose parent is pid and
// whose command name (as the kernel shortens it, 15 characters) starts
// comm: a controller manager's virtual kubelets, for instance.
func Children(pid int, comm string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == pid && strings.HasPrefix(s[open+1:end], comm[:min(len(comm), 15)]) {
			out = append(out, child)
		}
	}
	return out
}
