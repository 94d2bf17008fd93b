package charts

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/virtualkubelet/node"
)

// TestDaemonSetsStayOffVirtualNodes: no DaemonSet of the chart can be
// placed on one of ferry's virtual nodes, as the virtual kubelet builds
// them (its labels and taints): the DaemonSet controller places a pod on
// every node whose taints it tolerates and whose labels its required node
// affinity matches. A real node still takes it.
func TestDaemonSetsStayOffVirtualNodes(t *testing.T) {
	vn := &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Name: "milan", Namespace: ferryv1alpha1.SystemNamespace},
		Spec:       ferryv1alpha1.VirtualNodeSpec{ClusterID: "milan", Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
	}
	virtual, err := node.BuildNode(vn, node.Health{}, time.Now(), node.Endpoint{IP: "10.0.0.1", Port: 10250})
	if err != nil {
		t.Fatal(err)
	}
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", Labels: map[string]string{"kubernetes.io/hostname": "worker", "kubernetes.io/os": "linux"}}}
	checked := 0
	for _, o := range render(t, valueSets["network"]) {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			t.Fatal(err)
		}
		checked++
		pod := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		if fits(t, pod, virtual) {
			t.Errorf("DaemonSet %s: its pods fit the virtual node %s (labels %v, taints %v)", ds.Name, virtual.Name, virtual.Labels, virtual.Spec.Taints)
		}
		if !fits(t, pod, real) {
			t.Errorf("DaemonSet %s: its pods do not fit a real node", ds.Name)
		}
	}
	if checked == 0 {
		t.Fatal("the chart rendered no DaemonSet with the network values")
	}
}

// fits is the DaemonSet controller's predicate: taints tolerated, required
// node affinity matched.
func fits(t *testing.T, pod *corev1.Pod, n *corev1.Node) bool {
	t.Helper()
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return false
	}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(n)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
