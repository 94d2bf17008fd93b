package peering

import (
	"context"
	"fmt"
	"golang.org/x/sync/errgroup"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestGrantFollowsPodChurnOncePerDebounce churns pods on a provider's node
// and counts the grant's writes: at most one per Debounce (plus the first),
// not one per reconcile woken by the previous write.
func TestGrantFollowsPodChurnOncePerDebounce(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker"}}
	if err := c.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("5000")},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("5000")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
	}
	if err := c.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	// The API server taints a new node not-ready; no node lifecycle
	// controller runs here to lift it.
	node.Spec.Taints = nil
	if err := c.Client.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	tenant := TenantNamespace("consumer")
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "churn"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "churn"}},
		&ferryv1alpha1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: tenant},
			Spec: ferryv1alpha1.ResourceSliceSpec{ConsumerClusterID: "consumer"}},
	} {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	const debounce = time.Second
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: ferryscheme.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&GrantReconciler{Client: mgr.GetClient(), SharingPercentage: 50, Debounce: debounce}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	slice := &ferryv1alpha1.ResourceSlice{}
	key := client.ObjectKey{Namespace: tenant, Name: "consumer"}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.Get(ctx, key, slice) == nil && meta.IsStatusConditionTrue(slice.Status.Conditions, ferryv1alpha1.ResourceSliceGranted), nil
	})
	if err != nil {
		t.Fatalf("the slice was never granted: %v", err)
	}

	watcher, err := client.NewWithWatch(c.Config, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, &ferryv1alpha1.ResourceSliceList{}, client.InNamespace(tenant), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: slice.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const churn = 6 * time.Second
	start := time.Now()
	var creators errgroup.Group
	for g := range 4 {
		creators.Go(func() error {
			for i := 0; time.Since(start) < churn; i++ {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d-%04d", g, i), Namespace: "churn"}, Spec: corev1.PodSpec{
					NodeName: "worker", Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:v1",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}}
				if err := c.Client.Create(ctx, pod); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := creators.Wait(); err != nil {
		t.Fatal(err)
	}
	writes, quiet := 0, time.After(2*debounce)
count:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of the ResourceSlice ended")
			}
			if ev.Type == watch.Modified {
				writes++
			}
		case <-quiet:
			break count
		}
	}
	// One write per debounce period of churn, the last one after it, and
	// one for luck in timing.
	if limit := int(churn/debounce) + 2; writes > limit {
		t.Errorf("%d grant writes over %s of pod churn with a %s debounce, want at most %d", writes, churn, debounce, limit)
	}
	t.Logf("%d grant writes over %s of pod churn", writes, churn)
	if writes == 0 {
		t.Error("the grant never followed the pods")
	}
}

// TestGrantRelevantChangeSeesTopologyLabels: a provider node relabelled
// into another zone or region re-grants, so the virtual node's topology
// labels follow, and so does any other label (it may be a consumer's node
// pool key, which the node watch does not know); a heartbeat does not.
func TestGrantRelevantChangeSeesTopologyLabels(t *testing.T) {
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{
		corev1.LabelTopologyRegion: "eu-west", corev1.LabelTopologyZone: "eu-west-1a", "other": "x"}}}
	for name, tc := range map[string]struct {
		mutate func(*corev1.Node)
		want   bool
	}{
		"zone changed":        {func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = "eu-west-1b" }, true},
		"region removed":      {func(n *corev1.Node) { delete(n.Labels, corev1.LabelTopologyRegion) }, true},
		"another label":       {func(n *corev1.Node) { n.Labels["other"] = "y" }, true},
		"heartbeat (no diff)": {func(*corev1.Node) {}, false},
	} {
		cur := base.DeepCopy()
		tc.mutate(cur)
		if got := grantRelevantChange(base, cur); got != tc.want {
			t.Errorf("%s: relevant %v, want %v", name, got, tc.want)
		}
	}
}
