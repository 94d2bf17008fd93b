package framework

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/controllermanager"
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
}

// FerryOptions tune the in-process control plane; zero values get values
// short enough for tests.
type FerryOptions struct {
	SharingPercentage int
	GrantDebounce     time.Duration
	Health            vknode.Options
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
	f := &Ferry{ClusterID: id}
	cfg := rest.CopyConfig(c.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			f.LocalRequests.Add(1)
			return rt.RoundTrip(req)
		})
	})
	launcher := &peering.FuncLauncher{Run: func(ctx context.Context, vn types.NamespacedName) error {
		f.VirtualKubeletStarts.Add(1)
		o := opts.Health
		o.VirtualNodeNamespace, o.VirtualNodeName = vn.Namespace, vn.Name
		return vknode.Run(ctx, cfg, o)
	}}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mgr, err := controllermanager.New(runCtx, cfg, controllermanager.Options{
		ClusterID: id, SharingPercentage: opts.SharingPercentage, GrantDebounce: opts.GrantDebounce,
		Launcher: launcher, MetricsAddr: "0", HealthAddr: "0", SeveralPerProcess: true,
		Now: func() time.Time { return time.Now().Add(time.Duration(f.ClockOffset.Load())) },
	})
	Expect(err).NotTo(HaveOccurred(), "start ferry in %s", c.Name)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(runCtx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
		launcher.StopAll()
	})
	return f
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
