package nodetopology

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestReconcileLabelsRealNodesOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	virtualLabels := map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelTopologyCluster: "provider"}
	nodes := []client.Object{
		node("bare", nil),
		node("other-labels", map[string]string{"disk": "ssd"}),
		node("wrong", map[string]string{ferryv1alpha1.LabelTopologyCluster: "elsewhere"}),
		node("right", map[string]string{ferryv1alpha1.LabelTopologyCluster: "home"}),
		node("virtual", virtualLabels),
	}
	patches := map[string]int{}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nodes...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches[obj.GetName()]++
			return cl.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	r := &Reconciler{Client: c, ClusterID: "home"}
	for range 2 { // the second pass finds everything right: no write
		for _, n := range nodes {
			if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: n.GetName()}}); err != nil {
				t.Fatalf("reconcile %s: %v", n.GetName(), err)
			}
		}
	}
	want := map[string]int{"bare": 1, "other-labels": 1, "wrong": 1}
	if len(patches) != len(want) {
		t.Errorf("patched %v, want %v (once each, none at rest, never a virtual node)", patches, want)
	}
	for name, n := range want {
		if patches[name] != n {
			t.Errorf("node %s patched %d times, want %d", name, patches[name], n)
		}
	}
	for _, n := range nodes {
		var got corev1.Node
		if err := c.Get(context.Background(), client.ObjectKey{Name: n.GetName()}, &got); err != nil {
			t.Fatal(err)
		}
		want := "home"
		if n.GetName() == "virtual" {
			want = "provider"
		}
		if v := got.Labels[ferryv1alpha1.LabelTopologyCluster]; v != want {
			t.Errorf("node %s: %s=%q, want %q", n.GetName(), ferryv1alpha1.LabelTopologyCluster, v, want)
		}
		if n.GetName() == "other-labels" && got.Labels["disk"] != "ssd" {
			t.Errorf("node other-labels lost its own label: %v", got.Labels)
		}
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "gone"}}); err != nil {
		t.Errorf("a deleted node: %v", err)
	}
}
