package peering

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestWantedVirtualNodesOnePerGrantedPool(t *testing.T) {
	fc := &ferryv1alpha1.ForeignCluster{Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "gpu"}}
	slice := &ferryv1alpha1.ResourceSlice{}
	if w := wantedVirtualNodes(fc, slice); len(w) != 1 || w[0].name != "ferry-gpu" || w[0].pool != nil {
		t.Fatalf("without pools: %+v, want ferry-gpu alone", w)
	}
	slice.Spec.NodePools = &ferryv1alpha1.NodePools{LabelKey: "gpu-model"}
	slice.Status.Pools = []ferryv1alpha1.NodePoolGrant{
		{Value: "a100", Labels: map[string]string{"gpu-model": "a100"}},
		{Value: "t4", Labels: map[string]string{"gpu-model": "t4"}},
	}
	w := wantedVirtualNodes(fc, slice)
	if len(w) != 2 || w[0].name != PoolVirtualNodeName("gpu", "gpu-model", "a100") || w[1].pool.Value != "t4" || w[1].labels["gpu-model"] != "t4" {
		t.Fatalf("with pools: %+v", w)
	}
}

// TestRetiringAPoolDrainsThenRemovesItsVirtualNode: a VirtualNode the grant
// no longer calls for is tainted and its pods deleted, and removed (Node
// too) once none is left; the provider's other virtual nodes and their pods
// are left alone.
func TestRetiringAPoolDrainsThenRemovesItsVirtualNode(t *testing.T) {
	ctx := t.Context()
	fc := &ferryv1alpha1.ForeignCluster{ObjectMeta: metav1.ObjectMeta{Name: "gpu", UID: "fc-uid"},
		Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "gpu", CredentialsSecretRef: &ferryv1alpha1.SecretReference{Name: "ferry-peer-gpu", Namespace: ferryv1alpha1.SystemNamespace}}}
	controlled := func(name string) *ferryv1alpha1.VirtualNode {
		vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ferryv1alpha1.SystemNamespace,
			Labels: map[string]string{ferryv1alpha1.LabelClusterID: "gpu"}}, Spec: ferryv1alpha1.VirtualNodeSpec{ClusterID: "gpu"}}
		vn.OwnerReferences = []metav1.OwnerReference{{APIVersion: ferryv1alpha1.GroupVersion.String(), Kind: "ForeignCluster", Name: "gpu", UID: "fc-uid", Controller: new(true)}}
		return vn
	}
	kept, gone := PoolVirtualNodeName("gpu", "m", "kept"), PoolVirtualNodeName("gpu", "m", "gone")
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(fc, controlled(kept), controlled(gone),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: gone}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kept}},
		pod("on-kept", kept), pod("on-gone", gone)).Build()
	r := &PeerReconciler{Client: c, Launcher: &FuncLauncher{Run: func(ctx context.Context, _ types.NamespacedName) error { <-ctx.Done(); return nil }}}
	wants := []virtualNodeWant{{name: kept}}

	if err := r.retireVirtualNodes(ctx, fc, wants); err != nil {
		t.Fatal(err)
	}
	var vn ferryv1alpha1.VirtualNode
	if err := c.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: gone}, &vn); err != nil {
		t.Fatalf("the retiring VirtualNode went before its pods: %v", err)
	}
	if _, err := time.Parse(time.RFC3339, vn.Annotations[annotationRetiringSince]); err != nil || len(vn.Spec.Taints) != 1 ||
		vn.Spec.Taints[0].Key != TaintRetiring || vn.Spec.Taints[0].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("retiring VirtualNode: annotations %v, taints %v", vn.Annotations, vn.Spec.Taints)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "on-gone"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the retiring node's pod was not drained: %v", err)
	}

	if err := r.retireVirtualNodes(ctx, fc, wants); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: gone}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: gone}}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s of the drained pool is still there: %v", o, gone, err)
		}
	}
	for _, o := range []client.Object{&ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: kept}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kept}}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "on-kept"}}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%T %s of the kept pool: %v", o, o.GetName(), err)
		}
	}
}

func TestVirtualNodesConditionSumsThePools(t *testing.T) {
	vn := func(name string, s metav1.ConditionStatus) ferryv1alpha1.VirtualNode {
		return ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: ferryv1alpha1.VirtualNodeStatus{
			Conditions: []metav1.Condition{{Type: ferryv1alpha1.VirtualNodeNodeReady, Status: s, Reason: "R" + string(s), Message: "m"}}}}
	}
	if s, _, msg := virtualNodesCondition([]ferryv1alpha1.VirtualNode{vn("b", "True"), vn("a", "True")}); s != metav1.ConditionTrue || msg != "all 2 virtual nodes (node pools) are Ready" {
		t.Errorf("all Ready: %s %q", s, msg)
	}
	if s, reason, msg := virtualNodesCondition([]ferryv1alpha1.VirtualNode{vn("a", "True"), vn("b", "False")}); s != metav1.ConditionFalse || reason != "RFalse" || msg != "b: m" {
		t.Errorf("one NotReady: %s %s %q", s, reason, msg)
	}
}
