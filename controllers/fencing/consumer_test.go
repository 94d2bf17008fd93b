package fencing

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

func virtualNode(name, provider string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: provider}}}
}

func providerFC() *ferryv1alpha1.ForeignCluster {
	return &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "a", Role: ferryv1alpha1.RoleProvider}}
}

// The taint goes on the provider's virtual nodes only, and comes off only
// where ferry put it.
func TestSetOutOfService(t *testing.T) {
	ctx := context.Background()
	admin := virtualNode("ferry-a-admin", "a")
	admin.Spec.Taints = []corev1.Taint{{Key: ferryv1alpha1.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(virtualNode("ferry-a", "a"), virtualNode("ferry-b", "b"), admin, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "local"}}).Build()
	r := &Renewer{Client: c}
	fc := providerFC()
	n, err := r.setOutOfService(ctx, fc, true)
	if err != nil || n != 1 {
		t.Fatalf("setOutOfService(on) = %d, %v; want 1 node", n, err)
	}
	tainted := func(name string) bool {
		var node corev1.Node
		if err := c.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(node.Spec.Taints, isOutOfService)
	}
	if !tainted("ferry-a") || tainted("ferry-b") || tainted("local") {
		t.Fatal("the taint is not on exactly the provider's virtual nodes")
	}
	if got, err := r.outOfServiceNodes(ctx, fc); err != nil || len(got) != 1 || got[0] != "ferry-a" {
		t.Fatalf("outOfServiceNodes = %v, %v; want the one ferry tainted", got, err)
	}
	if n, err := r.setOutOfService(ctx, fc, false); err != nil || n != 1 {
		t.Fatalf("setOutOfService(off) = %d, %v", n, err)
	}
	if tainted("ferry-a") || !tainted("ferry-a-admin") {
		t.Fatal("ferry's taint stayed, or an admin's was removed")
	}
}

// On the provider's return, the ShadowPods whose pod here is gone,
// replaced, terminating or elsewhere are deleted; the others stay.
func TestRemoveStale(t *testing.T) {
	ctx := context.Background()
	pod := func(name, uid, node string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID(uid)}, Spec: corev1.PodSpec{NodeName: node}}
		if deleting {
			p.Finalizers = []string{"test/keep"}
			p.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
		}
		return p
	}
	consumer := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(
		virtualNode("ferry-a", "a"),
		pod("kept", "u-kept", "ferry-a", false),
		pod("replaced", "u-new", "ferry-a", false),
		pod("moved", "u-moved", "local-1", false),
		pod("terminating", "u-term", "ferry-a", true),
	).Build()
	sp := func(name, uid string) *ferryv1alpha1.ShadowPod {
		return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop-home", Labels: map[string]string{
			ferryv1alpha1.LabelOriginCluster: "home", ferryv1alpha1.LabelOriginNamespace: "shop", ferryv1alpha1.LabelOriginName: name, ferryv1alpha1.LabelOriginUID: uid}}}
	}
	provider := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(
		&ferryv1alpha1.TwinNamespace{ObjectMeta: metav1.ObjectMeta{Name: "shop-home", Namespace: "ferry-tenant-home"}},
		sp("kept", "u-kept"), sp("replaced", "u-old"), sp("moved", "u-moved"), sp("terminating", "u-term"), sp("gone", "u-gone"),
	).Build()
	r := &Renewer{Client: consumer, APIReader: consumer, ClusterID: "home"}
	n, err := r.removeStale(ctx, providerFC(), &peering.Provider{Client: provider, TenantNamespace: "ferry-tenant-home"})
	if err != nil || n.removed != 4 || n.seen != 5 || n.twins != 1 {
		t.Fatalf("removeStale = %d, %v; want 4", n, err)
	}
	for name, stays := range map[string]bool{"kept": true, "replaced": false, "moved": false, "terminating": false, "gone": false} {
		err := provider.Get(ctx, client.ObjectKey{Namespace: "shop-home", Name: name}, &ferryv1alpha1.ShadowPod{})
		if stays != (err == nil) || (!stays && !apierrors.IsNotFound(err)) {
			t.Errorf("ShadowPod %s: stays=%v, get err %v", name, stays, err)
		}
	}
}

// The consumer's ForeignCluster for the provider says when its virtual
// nodes are out of service, and when they no longer are.
func TestReportOutOfService(t *testing.T) {
	ctx := context.Background()
	fc := providerFC()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(fc).WithStatusSubresource(fc).Build()
	r := &Renewer{Client: c}
	cond := func() *metav1.Condition {
		var got ferryv1alpha1.ForeignCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(fc), &got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.ForeignClusterOutOfService)
	}
	r.report(ctx, fc, true, ReasonOutOfService, "out")
	if got := cond(); got == nil || got.Status != metav1.ConditionTrue || got.Reason != ReasonOutOfService {
		t.Fatalf("condition %+v", got)
	}
	r.report(ctx, fc, false, ReasonLeaseRenewed, "back")
	if got := cond(); got == nil || got.Status != metav1.ConditionFalse || got.Reason != ReasonLeaseRenewed {
		t.Fatalf("condition %+v", got)
	}
}
