package node

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func testVirtualNode() *ferryv1alpha1.VirtualNode {
	return &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "provider-a", Generation: 2},
		Spec: ferryv1alpha1.VirtualNodeSpec{
			ClusterID: "provider-a",
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("16200m"),
				corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
				"nvidia.com/gpu":      resource.MustParse("1"),
			},
			NodeShapes:     []ferryv1alpha1.NodeShape{{Count: 2, Resources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}},
			StorageClasses: []ferryv1alpha1.VirtualNodeStorageClass{{Name: "", ProviderClass: "standard"}, {Name: "fast", ProviderClass: "ssd"}},
			Labels:         map[string]string{"topology.kubernetes.io/zone": "remote", ferryv1alpha1.LabelNodeType: "spoofed", ferryv1alpha1.LabelTopologyCluster: "spoofed"},
			Taints: []corev1.Taint{
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: ferryv1alpha1.TaintVirtualNode, Effect: corev1.TaintEffectNoExecute},
			},
			KubeconfigSecretRef: corev1.LocalObjectReference{Name: "creds"},
		},
	}
}

func TestBuildNode(t *testing.T) {
	vn := testVirtualNode()
	start := time.Unix(1000, 0)
	n, err := BuildNode(vn, NewHealth(3, start), start, Endpoint{IP: "127.0.0.1", Port: 10250})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "provider-a" {
		t.Errorf("name %q, want the VirtualNode's name", n.Name)
	}
	wantLabels := map[string]string{
		"topology.kubernetes.io/zone": "remote",
		ferryv1alpha1.LabelNodeType:   ferryv1alpha1.NodeTypeVirtual, // not overridable
		ferryv1alpha1.LabelClusterID:  "provider-a",
		// the topology key of spreading across clusters, not overridable
		ferryv1alpha1.LabelTopologyCluster: "provider-a",
		corev1.LabelHostname:               "provider-a",
		corev1.LabelOSStable:               "linux",
		corev1.LabelArchStable:             "amd64",
	}
	if len(n.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want %v", n.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	wantTaints := []corev1.Taint{
		{Key: ferryv1alpha1.TaintVirtualNode, Effect: corev1.TaintEffectNoExecute},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	}
	if !taintsEqual(n.Spec.Taints, wantTaints) {
		t.Errorf("taints %v, want %v (ferry's first, no repeat)", n.Spec.Taints, wantTaints)
	}
	for name, q := range vn.Spec.Resources {
		if c := n.Status.Capacity[name]; c.Cmp(q) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, c.String(), q.String())
		}
		if a := n.Status.Allocatable[name]; a.Cmp(q) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, a.String(), q.String())
		}
	}
	var shapes []ferryv1alpha1.NodeShape
	if err := json.Unmarshal([]byte(n.Annotations[ferryv1alpha1.AnnotationNodeShapes]), &shapes); err != nil || len(shapes) != 1 || shapes[0].Count != 2 {
		t.Errorf("node shapes annotation %q (%v)", n.Annotations[ferryv1alpha1.AnnotationNodeShapes], err)
	}
	if classes, ok, err := placement.NodeStorageClasses(n); err != nil || !ok || len(classes) != 2 || classes[1].ProviderClass != "ssd" {
		t.Errorf("storage classes annotation %q: %v, %v, %v", n.Annotations[ferryv1alpha1.AnnotationStorageClasses], classes, ok, err)
	}
	if n.Status.NodeInfo.KubeletVersion != KubeletVersion || n.Status.NodeInfo.OperatingSystem != "linux" || n.Status.NodeInfo.Architecture != "amd64" {
		t.Errorf("node info %+v", n.Status.NodeInfo)
	}
	conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range n.Status.Conditions {
		conds[c.Type] = c
	}
	if c := conds[corev1.NodeReady]; c.Status != corev1.ConditionTrue || c.Reason != ReasonProviderReachable {
		t.Errorf("Ready condition %+v", c)
	}
	for _, typ := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		if c, ok := conds[typ]; !ok || c.Status != corev1.ConditionFalse {
			t.Errorf("%s condition %+v, want False", typ, c)
		}
	}

	// spec.nodeName wins; no shapes, no annotation; unhealthy, NotReady.
	vn.Spec.NodeName, vn.Spec.NodeShapes, vn.Spec.StorageClasses = "ferry-provider-a", nil, nil
	h := NewHealth(1, start)
	h.Observe(errFake, start.Add(time.Second))
	n, err = BuildNode(vn, h, start, Endpoint{IP: "127.0.0.1", Port: 10250})
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "ferry-provider-a" || n.Labels[corev1.LabelHostname] != "ferry-provider-a" {
		t.Errorf("name %q hostname %q, want spec.nodeName", n.Name, n.Labels[corev1.LabelHostname])
	}
	if _, ok := n.Annotations[ferryv1alpha1.AnnotationNodeShapes]; ok {
		t.Errorf("node shapes annotation set without shapes")
	}
	if _, ok := n.Annotations[ferryv1alpha1.AnnotationStorageClasses]; ok {
		t.Errorf("storage classes annotation set without classes")
	}
	if c := n.Status.Conditions[0]; c.Type != corev1.NodeReady || c.Status != corev1.ConditionUnknown || c.Reason != ReasonProviderUnreachable {
		t.Errorf("Ready condition %+v, want Unknown/ProviderUnreachable", c)
	}
}

type fakeError struct{}

func (fakeError) Error() string { return "fake" }

var errFake error = fakeError{}

func TestNodeReportEqual(t *testing.T) {
	start := time.Unix(1000, 0)
	build := func(mutate func(*ferryv1alpha1.VirtualNode), h Health) *corev1.Node {
		vn := testVirtualNode()
		if mutate != nil {
			mutate(vn)
		}
		n, err := BuildNode(vn, h, start, Endpoint{IP: "127.0.0.1", Port: 10250})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	healthy := NewHealth(3, start)
	base := build(nil, healthy)

	same := build(nil, healthy)
	same.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(start.Add(time.Hour))
	if !nodeReportEqual(base, same) {
		t.Error("heartbeat time counted as a change")
	}
	// Same quantity, other spelling: no change.
	if !nodeReportEqual(base, build(func(vn *ferryv1alpha1.VirtualNode) {
		vn.Spec.Resources[corev1.ResourceCPU] = resource.MustParse("16.2")
	}, healthy)) {
		t.Error("16200m and 16.2 cpu counted as a change")
	}
	// A taint change is not reported through the node controller.
	if !nodeReportEqual(base, build(func(vn *ferryv1alpha1.VirtualNode) { vn.Spec.Taints = nil }, healthy)) {
		t.Error("a taint change counted as a status change")
	}
	unhealthy := NewHealth(1, start)
	unhealthy.Observe(errFake, start)
	for name, other := range map[string]*corev1.Node{
		"cpu":    build(func(vn *ferryv1alpha1.VirtualNode) { vn.Spec.Resources[corev1.ResourceCPU] = resource.MustParse("8") }, healthy),
		"label":  build(func(vn *ferryv1alpha1.VirtualNode) { vn.Spec.Labels["x"] = "y" }, healthy),
		"shapes": build(func(vn *ferryv1alpha1.VirtualNode) { vn.Spec.NodeShapes[0].Count = 3 }, healthy),
		"storage classes": build(func(vn *ferryv1alpha1.VirtualNode) {
			vn.Spec.StorageClasses = append(vn.Spec.StorageClasses, ferryv1alpha1.VirtualNodeStorageClass{Name: "gold", ProviderClass: "ssd"})
		}, healthy),
		"health": build(nil, unhealthy),
	} {
		if nodeReportEqual(base, other) {
			t.Errorf("%s change not seen", name)
		}
	}
}

func TestMergeTaints(t *testing.T) {
	ferry := VirtualNodeTaint()
	gpu := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	gpu2 := corev1.Taint{Key: "dedicated", Value: "gpu2", Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: time.Unix(5, 0)}}
	admin := corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name                       string
		current, previous, managed []corev1.Taint
		want                       []corev1.Taint
		wantChanged                bool
	}{
		{name: "in place", current: []corev1.Taint{ferry, gpu}, managed: []corev1.Taint{ferry, gpu}, want: []corev1.Taint{ferry, gpu}},
		{name: "order does not matter", current: []corev1.Taint{gpu, notReady, ferry}, managed: []corev1.Taint{ferry, gpu}, want: []corev1.Taint{notReady, ferry, gpu}},
		{name: "others kept", current: []corev1.Taint{ferry, notReady, admin}, managed: []corev1.Taint{ferry, gpu}, want: []corev1.Taint{notReady, admin, ferry, gpu}, wantChanged: true},
		{name: "removed from spec", current: []corev1.Taint{ferry, gpu, admin}, previous: []corev1.Taint{ferry, gpu}, managed: []corev1.Taint{ferry}, want: []corev1.Taint{admin, ferry}, wantChanged: true},
		{name: "value changed", current: []corev1.Taint{ferry, gpu}, previous: []corev1.Taint{ferry, gpu}, managed: []corev1.Taint{ferry, gpu2}, want: []corev1.Taint{ferry, gpu2}, wantChanged: true},
		{name: "ferry's taint restored", current: []corev1.Taint{admin}, managed: []corev1.Taint{ferry}, want: []corev1.Taint{admin, ferry}, wantChanged: true},
		{name: "ferry's taint with another effect replaced", current: []corev1.Taint{{Key: ferry.Key, Effect: corev1.TaintEffectNoSchedule}}, managed: []corev1.Taint{ferry}, want: []corev1.Taint{ferry}, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := MergeTaints(tt.current, tt.previous, tt.managed)
			if changed != tt.wantChanged || !taintsEqual(got, tt.want) {
				t.Errorf("MergeTaints = %v, %v; want %v, %v", got, changed, tt.want, tt.wantChanged)
			}
		})
	}
}

func TestDroppedLabels(t *testing.T) {
	before := map[string]string{"a": "1", "zone": "z", "region": "r"}
	after := map[string]string{"a": "1", "region": "r2"}
	got := DroppedLabels(nil, before, after)
	if len(got) != 1 || !got["zone"] {
		t.Errorf("dropped %v, want zone", got)
	}
	// still pending, and another one dropped; one back again is not removed
	got = DroppedLabels(map[string]bool{"zone": true, "old": true}, map[string]string{"a": "1", "x": "1"}, map[string]string{"a": "1", "old": "again"})
	if len(got) != 2 || !got["zone"] || !got["x"] {
		t.Errorf("dropped %v, want zone and x", got)
	}
	if got := DroppedLabels(nil, after, after); got != nil {
		t.Errorf("nothing changed, dropped %v", got)
	}
}
