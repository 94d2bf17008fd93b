package framework

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/controllermanager"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

// Ferry is ferry's control plane running in-process for one test cluster:
// its controller manager, and its virtual kubelets as goroutines.
type Ferry struct {
	// ClusterID of the cluster.
	ClusterID ferryv1alpha1.ClusterID
	// VirtualKubeletStarts counts virtual kubelet starts, so a spec can tell
	// that one kept running through an outage.
	VirtualKubeletStarts atomic.Int32
	// LocalRequests counts the requests ferry (controller manager and
	// virtual kubelets) sends to its own cluster's API server.
	LocalRequests atomic.Int64
	// ClockOffset moves the controller manager's clock (credential renewal)
	// forward.
	ClockOffset atomic.Int64
	// Processes runs the virtual kubelets when they are real processes
	// (FerryOptions.VirtualKubeletBinary), so a spec can kill one.
	Processes *peering.ProcessLauncher

	name string
	stop func() <-chan struct{}
}

// FerryOptions tune the in-process control plane; zero values get values
// short enough for tests.
type FerryOptions struct {
	SharingPercentage int
	GrantDebounce     time.Duration
	Health            vknode.Options
	// ClusterLabels are the cluster's labels suggested to its consumers.
	ClusterLabels map[string]string
	// Network configures the network fabric; its PodCIDR defaults to the
	// test cluster's (the service CIDR is read from the API server).
	Network fabricctrl.Options
	// VirtualKubeletBinary, when set, runs virtual kubelets as processes
	// of this binary (see BuildVirtualKubelet) instead of in-process.
	VirtualKubeletBinary string
	// MetricsAddr serves the controller manager's metrics, securely (off
	// when empty).
	MetricsAddr string
	// AsServiceAccounts runs the controller manager and the in-process
	// virtual kubelets with the identities and roles the manifests give
	// them (ServiceAccount ferry-controller-manager, and each virtual
	// kubelet its own, peering.VirtualKubeletIdentity, impersonated), not as
	// the cluster's admin, so a right missing from the generated roles, or
	// refused by the virtual kubelets' admission policy, fails the spec.
	AsServiceAccounts bool
}

// ServiceAccount is the identity of ServiceAccount namespace/name.
func ServiceAccount(namespace, name string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
}

// StartFerry runs ferry's controller manager for c until the current node
// ends, with virtual kubelets run in-process.
func StartFerry(ctx context.Context, c *testbed.Cluster, id ferryv1alpha1.ClusterID, opts FerryOptions) *Ferry {
	GinkgoHelper()
	if opts.SharingPercentage == 0 {
		opts.SharingPercentage = 90
	}
	if opts.GrantDebounce == 0 {
		opts.GrantDebounce = 300 * time.Millisecond
	}
	if opts.Network.PodCIDR == "" {
		opts.Network.PodCIDR = c.PodCIDR()
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	f := &Ferry{ClusterID: id}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			f.LocalRequests.Add(1)
			return rt.RoundTrip(req)
		})
	})
	vkCfg := cfg
	if opts.AsServiceAccounts {
		for _, f := range []string{"serviceaccounts.yaml", "rolebindings.yaml"} {
			out, err := c.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-e2e", "-n", ferryv1alpha1.SystemNamespace,
				"-f", filepath.Join(RepoRoot(), "manifests", "controller-manager", f))
			Expect(err).NotTo(HaveOccurred(), "apply %s to %s:\n%s", f, c.Name, out)
		}
		cfg = rest.CopyConfig(cfg)
		cfg.Impersonate = ServiceAccount(ferryv1alpha1.SystemNamespace, "ferry-controller-manager")
	}
	funcs := &peering.FuncLauncher{Run: func(ctx context.Context, vn types.NamespacedName) error {
		f.VirtualKubeletStarts.Add(1)
		o := opts.Health
		o.VirtualNodeNamespace, o.VirtualNodeName = vn.Namespace, vn.Name
		o.DisableNetwork = opts.Network.Disabled
		if o.KubeletAddress == "" {
			o.KubeletAddress = "127.0.0.1:0" // several virtual kubelets, one host
		}
		vkCfg := vkCfg
		if opts.AsServiceAccounts {
			vkCfg = rest.CopyConfig(vkCfg)
			vkCfg.Impersonate = ServiceAccount(vn.Namespace, peering.VirtualKubeletIdentity(vn.Name))
		}
		return vknode.Run(ctx, vkCfg, o)
	}}
	var launcher peering.VirtualKubeletLauncher = funcs
	if opts.VirtualKubeletBinary != "" {
		h := opts.Health
		f.Processes = &peering.ProcessLauncher{Binary: opts.VirtualKubeletBinary, Kubeconfig: c.KubeconfigPath, LogDir: c.Dir,
			ExtraArgs: []string{
				"--health-check-period=" + h.HealthCheckPeriod.String(), "--health-check-timeout=" + h.HealthCheckTimeout.String(),
				fmt.Sprintf("--health-check-failure-threshold=%d", h.FailureThreshold), "-v=2",
			}}
		if opts.Network.Disabled {
			f.Processes.ExtraArgs = append(f.Processes.ExtraArgs, "--disable-network")
		}
		launcher = f.Processes
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mgr, err := controllermanager.New(runCtx, cfg, controllermanager.Options{
		ClusterID: id, SharingPercentage: opts.SharingPercentage, GrantDebounce: opts.GrantDebounce, ClusterLabels: opts.ClusterLabels,
		Launcher: launcher, Network: opts.Network, VolumeMoverImage: "ferry-volume-mover:e2e", MetricsAddr: opts.MetricsAddr, MetricsSecure: true, HealthAddr: "0", SeveralPerProcess: true,
		Now: func() time.Time { return time.Now().Add(time.Duration(f.ClockOffset.Load())) },
	})
	Expect(err).NotTo(HaveOccurred(), "start ferry in %s", c.Name)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(runCtx)).To(Succeed())
	}()
	var once sync.Once
	var stopped = make(chan struct{})
	f.stop = func() <-chan struct{} {
		once.Do(func() {
			cancel()
			go func() {
				defer close(stopped)
				<-done
				funcs.StopAll()
				if f.Processes != nil {
					f.Processes.StopAll(context.Background())
				}
			}()
		})
		return stopped
	}
	f.name = c.Name
	DeferCleanup(func(ctx SpecContext) { f.waitStopped(ctx) }, NodeTimeout(stopTimeout))
	return f
}

// Stop ends the controller manager and its virtual kubelets, as a process
// exit would (specs restart ferry with StartFerry again); the end of the
// node stops it anyway.
func (f *Ferry) Stop(ctx context.Context) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	f.waitStopped(ctx)
}

func (f *Ferry) waitStopped(ctx context.Context) {
	GinkgoHelper()
	select {
	case <-f.stop():
	case <-ctx.Done():
		// A component that ignores its cancelled context would hang the
		// suite until go test's timeout, which shows little; fail here
		// with the stacks of ferry's goroutines instead.
		Fail(fmt.Sprintf("ferry in %s did not stop within %s; ferry's goroutines:\n%s", f.name, stopTimeout, ferryGoroutines()))
	}
}

// stopTimeout bounds how long ferry's in-process components may take to
// stop at the end of a spec.
const stopTimeout = 2 * time.Minute

// ferryGoroutines is the stack of every goroutine running ferry's code.
func ferryGoroutines() string {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var b strings.Builder
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/ferry-io/ferry/") && !strings.Contains(g, "ferryGoroutines") {
			b.WriteString(g)
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// BuildVirtualKubelet builds ferry-virtual-kubelet into a folder removed
// when the suite ends, and returns its path.
func BuildVirtualKubelet(ctx context.Context) string {
	GinkgoHelper()
	return buildBinary(ctx, "ferry-virtual-kubelet")
}

// buildBinary builds cmd/<name> into a folder removed when the suite ends.
func buildBinary(ctx context.Context, name string) string {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", name+"-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = RepoRoot()
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "build %s:\n%s", name, out)
	return bin
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
