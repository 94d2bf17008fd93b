package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

// requestCounter counts the requests of a client, by method and path.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		key := r.Method + " " + r.URL.Path
		if r.URL.Query().Get("watch") == "true" {
			key += "?watch"
		}
		c.mu.Lock()
		if c.counts == nil {
			c.counts = map[string]int{}
		}
		c.counts[key]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// take returns the counts so far and starts afresh.
func (c *requestCounter) take() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts, total := c.counts, 0
	c.counts = nil
	for _, n := range counts {
		total += n
	}
	return counts, total
}

func formatCounts(counts map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "\n  %3d %s", counts[k], k)
	}
	return b.String()
}

// eventually polls check until it succeeds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		last = check(ctx)
		cancel()
		if last == nil {
			return
		}
		if time.Now().After(deadline) || t.Context().Err() != nil {
			t.Fatalf("%s: not within %s: %v", what, timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if sameTaint(t, want) && t.Value == want.Value {
			return true
		}
	}
	return false
}

// TestRun runs a virtual kubelet against real consumer and provider API
// servers: it registers the Node and its Lease, stays quiet at rest, carries
// VirtualNode changes to the Node, and follows a provider outage and return
// without restarting.
// startConsumerAndProvider starts two clusters, stopped when the test
// ends (with their last log lines when it failed).
func startConsumerAndProvider(t *testing.T) (consumer, provider *testbed.Cluster) {
	t.Helper()
	testbed.RequireBinaries(t)
	clusters, err := testbed.StartClusters(t.Context(), testbed.Options{Name: "consumer"}, testbed.Options{Name: "provider"})
	if err != nil {
		t.Fatal(err)
	}
	consumer, provider = clusters[0], clusters[1]
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(consumer.Logs(20), provider.Logs(20))
		}
		_ = consumer.Stop()
		_ = provider.Stop()
	})
	return consumer, provider
}

// applyBase installs ferry's API (manifests/base) in c, as users do.
func applyBase(t *testing.T, c *testbed.Cluster) {
	t.Helper()
	base, err := filepath.Abs(filepath.Join("..", "..", "manifests", "base"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(t.Context(), "apply", "--server-side", "--field-manager=ferry-test", "-k", base); err != nil {
		t.Fatalf("apply %s to %s: %v\n%s", base, c.Name, err, out)
	}
}

func TestRun(t *testing.T) {
	ctx := t.Context()
	consumer, provider := startConsumerAndProvider(t)

	// Install ferry's API as users do and wait until it is served.
	applyBase(t, consumer)
	eventually(t, 30*time.Second, "ferry.io/v1alpha1 virtualnodes served", func(context.Context) error {
		resources, err := consumer.Kube.Discovery().ServerResourcesForGroupVersion(ferryv1alpha1.GroupVersion.String())
		if err != nil {
			return err
		}
		for _, r := range resources.APIResources {
			if r.Name == "virtualnodes" {
				return nil
			}
		}
		return errors.New("virtualnodes not in discovery")
	})

	kubeconfig, err := os.ReadFile(provider.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	ns := ferryv1alpha1.SystemNamespace
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-kubeconfig"},
		Data:       map[string][]byte{ferryv1alpha1.KubeconfigSecretKey: kubeconfig},
	}
	if err := consumer.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	identity := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.ClusterIdentityConfigMap},
		Data:       map[string]string{ferryv1alpha1.ClusterIdentityKey: "consumer"},
	}
	if err := consumer.Client.Create(ctx, identity); err != nil {
		t.Fatal(err)
	}
	vn := &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider"},
		Spec: ferryv1alpha1.VirtualNodeSpec{
			ClusterID: "provider",
			NodeName:  "ferry-provider",
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("16200m"),
				corev1.ResourceMemory: resource.MustParse("60Gi"),
				corev1.ResourcePods:   resource.MustParse("300"),
				"nvidia.com/gpu":      resource.MustParse("1"),
			},
			NodeShapes: []ferryv1alpha1.NodeShape{{Count: 3, Resources: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("5400m"), corev1.ResourceMemory: resource.MustParse("20Gi"),
			}}},
			Labels:              map[string]string{"topology.kubernetes.io/region": "provider"},
			KubeconfigSecretRef: corev1.LocalObjectReference{Name: secret.Name},
		},
	}
	if err := consumer.Client.Create(ctx, vn); err != nil {
		t.Fatal(err)
	}

	local := rest.CopyConfig(consumer.Config)
	var consumerRequests, providerRequests requestCounter
	local.Wrap(consumerRequests.wrap)
	wrapProviderTransport = providerRequests.wrap
	t.Cleanup(func() { wrapProviderTransport = nil })

	opts := Options{
		VirtualNodeNamespace: ns, VirtualNodeName: vn.Name, KubeletAddress: "127.0.0.1:0",
		HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3,
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	runCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, local, opts) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	stillRunning := func() {
		t.Helper()
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("Run returned early: %v", err)
		default:
		}
	}

	nodes := consumer.Kube.CoreV1().Nodes()
	// 1. The Node, as the VirtualNode describes it, Ready.
	eventually(t, 30*time.Second, "node registered and Ready", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, "ferry-provider", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for name, want := range vn.Spec.Resources {
			if got := n.Status.Capacity[name]; got.Cmp(want) != 0 {
				return fmt.Errorf("capacity %s = %s, want %s", name, got.String(), want.String())
			}
			if got := n.Status.Allocatable[name]; got.Cmp(want) != 0 {
				return fmt.Errorf("allocatable %s = %s, want %s", name, got.String(), want.String())
			}
		}
		for k, v := range map[string]string{
			ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: "provider",
			corev1.LabelHostname: "ferry-provider", "topology.kubernetes.io/region": "provider",
		} {
			if n.Labels[k] != v {
				return fmt.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
			}
		}
		if !hasTaint(n, VirtualNodeTaint()) {
			return fmt.Errorf("taints %v lack %v", n.Spec.Taints, VirtualNodeTaint())
		}
		if a := n.Annotations[ferryv1alpha1.AnnotationNodeShapes]; !strings.Contains(a, `"count":3`) || !strings.Contains(a, "5400m") {
			return fmt.Errorf("node shapes annotation %q", a)
		}
		if c := nodeCondition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonProviderReachable {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	// 2. Its Lease.
	eventually(t, 30*time.Second, "node lease", func(ctx context.Context) error {
		l, err := consumer.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "ferry-provider", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "ferry-provider" || l.Spec.RenewTime == nil {
			return fmt.Errorf("lease spec %+v", l.Spec)
		}
		return nil
	})
	// 3. The VirtualNode's status.
	checkStatus := func(wantReady metav1.ConditionStatus, wantReason string) func(context.Context) error {
		return func(ctx context.Context) error {
			var got ferryv1alpha1.VirtualNode
			if err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(vn), &got); err != nil {
				return err
			}
			if got.Status.NodeName != "ferry-provider" || got.Status.ObservedGeneration != got.Generation {
				return fmt.Errorf("status nodeName %q observedGeneration %d (generation %d)", got.Status.NodeName, got.Status.ObservedGeneration, got.Generation)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.VirtualNodeKubeletRunning); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("VirtualKubeletRunning %+v", c)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.VirtualNodeNodeReady); c == nil || c.Status != wantReady || c.Reason != wantReason {
				return fmt.Errorf("NodeReady %+v, want %s/%s", c, wantReady, wantReason)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "virtual node status", checkStatus(metav1.ConditionTrue, ReasonProviderReachable))
	stillRunning()

	// 4. At rest, the virtual kubelet is quiet: lease renewals, the node
	// controller's periodic status heartbeat and the provider probes.
	// Start-up is over once a few seconds pass without a watch starting:
	// offloading and reflection start their informers only after the
	// provider's scope is decided, which on a loaded machine comes seconds
	// after the node is Ready. Watches that keep restarting never settle
	// and fail here.
	settled := false
	for deadline := time.Now().Add(time.Minute); !settled && time.Now().Before(deadline); {
		time.Sleep(3 * time.Second)
		counts, _ := consumerRequests.take()
		settled = !slices.ContainsFunc(slices.Collect(maps.Keys(counts)), func(k string) bool { return strings.HasSuffix(k, "?watch") })
	}
	if !settled {
		t.Fatalf("the virtual kubelet still starts watches a minute after its node is Ready")
	}
	providerRequests.take()
	const atRest = 30 * time.Second
	time.Sleep(atRest)
	counts, total := consumerRequests.take()
	pcounts, ptotal := providerRequests.take()
	t.Logf("requests at rest over %s: consumer %d (%.1f/min):%s\nprovider %d (%.1f/min, one probe per %s):%s",
		atRest, total, float64(total)/atRest.Minutes(), formatCounts(counts), ptotal, float64(ptotal)/atRest.Minutes(), opts.HealthCheckPeriod, formatCounts(pcounts))
	leaseRenewals := int(atRest/(10*time.Second)) + 1 // 40s lease, renewed every 10s
	statusHeartbeats := 2 * (int(atRest/time.Minute) + 1)
	if limit := leaseRenewals + statusHeartbeats + 3; total > limit {
		t.Errorf("%d requests to the consumer at rest in %s, want at most %d", total, atRest, limit)
	}
	if limit := int(atRest/opts.HealthCheckPeriod) + 5; ptotal > limit {
		t.Errorf("%d requests to the provider at rest in %s, want at most %d", ptotal, atRest, limit)
	}
	stillRunning()

	// 5. VirtualNode changes reach the Node within seconds.
	var cur ferryv1alpha1.VirtualNode
	if err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(vn), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Resources[corev1.ResourceCPU] = resource.MustParse("8")
	cur.Spec.Labels["extra"] = "yes"
	cur.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "ml", Effect: corev1.TaintEffectNoSchedule}}
	cur.Spec.StorageClasses = []ferryv1alpha1.VirtualNodeStorageClass{{Name: "", ProviderClass: "standard"}, {Name: "fast", ProviderClass: "ssd"}}
	if err := consumer.Client.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "node updated from the virtual node", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, "ferry-provider", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Status.Capacity[corev1.ResourceCPU]; got.Cmp(resource.MustParse("8")) != 0 {
			return fmt.Errorf("capacity cpu %s, want 8", got.String())
		}
		if got := n.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("8")) != 0 {
			return fmt.Errorf("allocatable cpu %s, want 8", got.String())
		}
		if n.Labels["extra"] != "yes" {
			return fmt.Errorf("labels %v lack extra=yes", n.Labels)
		}
		if !hasTaint(n, cur.Spec.Taints[0]) || !hasTaint(n, VirtualNodeTaint()) {
			return fmt.Errorf("taints %v", n.Spec.Taints)
		}
		if classes, _, err := placement.NodeStorageClasses(n); err != nil || !slices.Equal(classes, cur.Spec.StorageClasses) {
			return fmt.Errorf("storage classes annotation %q, want %v (%v)", n.Annotations[ferryv1alpha1.AnnotationStorageClasses], cur.Spec.StorageClasses, err)
		}
		return nil
	})
	eventually(t, 10*time.Second, "virtual node status observes the new generation", checkStatus(metav1.ConditionTrue, ReasonProviderReachable))

	// 6. Provider outage: Ready Unknown after threshold x period (plus slack);
	// back: Ready, in the same Run.
	provider.StopAPIServer()
	eventually(t, 20*time.Second, "node Ready Unknown while the provider is down", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, "ferry-provider", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := nodeCondition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionUnknown || c.Reason != ReasonProviderUnreachable || c.Message == "" {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	eventually(t, 10*time.Second, "virtual node NodeReady False", checkStatus(metav1.ConditionFalse, ReasonProviderUnreachable))
	stillRunning()
	if err := provider.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "node Ready once the provider is back", func(ctx context.Context) error {
		n, err := nodes.Get(ctx, "ferry-provider", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := nodeCondition(n, corev1.NodeReady); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonProviderReachable {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	eventually(t, 10*time.Second, "virtual node NodeReady True", checkStatus(metav1.ConditionTrue, ReasonProviderReachable))
	stillRunning()

	// 7. Cancel: Run returns nil, the Node stays, the status says stopped.
	cancel()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("Run = %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of cancel")
	}
	if _, err := nodes.Get(ctx, "ferry-provider", metav1.GetOptions{}); err != nil {
		t.Errorf("node after stop: %v, want it kept", err)
	}
	var after ferryv1alpha1.VirtualNode
	if err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(vn), &after); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(after.Status.Conditions, ferryv1alpha1.VirtualNodeKubeletRunning); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("VirtualKubeletRunning after stop %+v, want False", c)
	}
}

// TestRunFailsClearly checks the start-up errors name what is missing.
func TestRunFailsClearly(t *testing.T) {
	testbed.RequireBinaries(t)
	ctx := t.Context()
	c, err := testbed.Start(ctx, testbed.Options{Name: "consumer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	applyBase(t, c)
	ns := ferryv1alpha1.SystemNamespace
	opts := Options{VirtualNodeNamespace: ns, VirtualNodeName: "p", KubeletAddress: "127.0.0.1:0"}

	eventually(t, 30*time.Second, "missing virtual node reported", func(ctx context.Context) error {
		err := Run(ctx, c.Config, opts)
		if err == nil || !strings.Contains(err.Error(), "read virtual node ferry-system/p") || !apierrors.IsNotFound(err) {
			return fmt.Errorf("Run = %v, want a not-found error naming the virtual node", err)
		}
		return nil
	})

	vn := &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
		Spec:       ferryv1alpha1.VirtualNodeSpec{ClusterID: "p", KubeconfigSecretRef: corev1.LocalObjectReference{Name: "creds"}},
	}
	eventually(t, 30*time.Second, "create virtual node", func(ctx context.Context) error { return c.Client.Create(ctx, vn) })
	err = Run(ctx, c.Config, opts)
	if err == nil || !strings.Contains(err.Error(), "secret ferry-system/creds") || !apierrors.IsNotFound(err) {
		t.Errorf("Run without the secret = %v, want a not-found error naming it", err)
	}
	if err := c.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}, Data: map[string][]byte{"other": nil}}); err != nil {
		t.Fatal(err)
	}
	err = Run(ctx, c.Config, opts)
	if err == nil || !strings.Contains(err.Error(), `secret ferry-system/creds`) || !strings.Contains(err.Error(), `no key "kubeconfig"`) {
		t.Errorf("Run with a secret without the key = %v, want an error naming the secret and key", err)
	}
	if err := Run(ctx, c.Config, Options{VirtualNodeNamespace: ns}); err == nil || !strings.Contains(err.Error(), "--virtual-node-name") {
		t.Errorf("Run without a name = %v", err)
	}
}
