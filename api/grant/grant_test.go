package grant

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func node(name, cpu, mem string, mutate ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
				corev1.ResourcePods: resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mutate {
		m(&n)
	}
	return n
}

func pod(nodeName, cpu string, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

func TestNinetyPercentOfThreeNodesWithSixCPURequested(t *testing.T) {
	nodes := []corev1.Node{node("a", "8", "32Gi"), node("b", "8", "32Gi"), node("c", "8", "32Gi")}
	pods := []corev1.Pod{pod("a", "2"), pod("b", "2"), pod("c", "2")}
	free := ComputeFree(nodes, pods, nil)
	got, err := Share(free.Total, 90)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[corev1.ResourceName]resource.Quantity{
		corev1.ResourceCPU:    q("16200m"),
		corev1.ResourceMemory: *resource.NewQuantity(96*(1<<30)*9/10, resource.BinarySI),
		corev1.ResourcePods:   q("295"), // (330-3)*0.9 = 294.3, whole units round up
	} {
		if g := got[name]; g.Cmp(want) != 0 {
			t.Errorf("%s = %s, want %s", name, g.String(), want.String())
		}
	}
}

func TestComputeFree(t *testing.T) {
	virtual := func(n *corev1.Node) {
		n.Labels = map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}
	}
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
	}
	preferNot := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	tests := []struct {
		name    string
		nodes   []corev1.Node
		pods    []corev1.Pod
		count   func(*corev1.Pod) bool
		wantCPU string
	}{
		{"a virtual node is never shared (two clusters peered both ways)", []corev1.Node{node("a", "8", "1Gi"), node("v", "90", "1Gi", virtual)}, nil, nil, "8"},
		{"NotReady nodes are not shared", []corev1.Node{node("a", "8", "1Gi"), node("b", "8", "1Gi", notReady)}, nil, nil, "8"},
		{"cordoned nodes are not shared", []corev1.Node{node("a", "8", "1Gi"), node("b", "8", "1Gi", cordoned)}, nil, nil, "8"},
		{"NoSchedule-tainted nodes are not shared", []corev1.Node{node("a", "8", "1Gi"), node("b", "8", "1Gi", tainted)}, nil, nil, "8"},
		{"PreferNoSchedule does not exclude", []corev1.Node{node("a", "8", "1Gi", preferNot)}, nil, nil, "8"},
		{"terminal pods hold nothing", []corev1.Node{node("a", "8", "1Gi")},
			[]corev1.Pod{pod("a", "3", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pod("a", "1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, nil, "8"},
		{"pending pods without a node hold nothing", []corev1.Node{node("a", "8", "1Gi")}, []corev1.Pod{pod("", "3")}, nil, "8"},
		{"pods on excluded nodes do not count", []corev1.Node{node("a", "8", "1Gi"), node("v", "90", "1Gi", virtual)}, []corev1.Pod{pod("v", "50")}, nil, "8"},
		{"init containers count as their maximum, overhead adds", []corev1.Node{node("a", "8", "1Gi")},
			[]corev1.Pod{pod("a", "1", func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{
					{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("3")}}},
					{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("2")}}},
				}
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: q("250m")}
			})}, nil, "4750m"},
		{"sidecar init containers add up", []corev1.Node{node("a", "8", "1Gi")},
			[]corev1.Pod{pod("a", "1", func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("500m")}}}}
			})}, nil, "6500m"},
		{"an overcommitted node frees nothing, and owes nothing", []corev1.Node{node("a", "8", "1Gi"), node("b", "8", "1Gi")}, []corev1.Pod{pod("a", "12")}, nil, "8"},
		{"the consumer's own pods are part of its grant", []corev1.Node{node("a", "8", "1Gi")},
			[]corev1.Pod{pod("a", "2"), pod("a", "3", func(p *corev1.Pod) { p.Labels = map[string]string{ferryv1alpha1.LabelOriginCluster: "me"} })},
			func(p *corev1.Pod) bool { return p.Labels[ferryv1alpha1.LabelOriginCluster] != "me" }, "6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			free := ComputeFree(tc.nodes, tc.pods, tc.count)
			if got := free.Total[corev1.ResourceCPU]; got.Cmp(q(tc.wantCPU)) != 0 {
				t.Fatalf("free cpu = %s, want %s", got.String(), tc.wantCPU)
			}
		})
	}
}

func TestShareRounding(t *testing.T) {
	tests := []struct {
		name    string
		free    corev1.ResourceList
		percent int
		want    corev1.ResourceList
	}{
		{"one GPU at 90% is one GPU, never zero", corev1.ResourceList{"nvidia.com/gpu": q("1")}, 90, corev1.ResourceList{"nvidia.com/gpu": q("1")}},
		{"three GPUs at 50% round up to two", corev1.ResourceList{"nvidia.com/gpu": q("3")}, 50, corev1.ResourceList{"nvidia.com/gpu": q("2")}},
		{"zero GPUs stay zero", corev1.ResourceList{"nvidia.com/gpu": q("0")}, 90, corev1.ResourceList{"nvidia.com/gpu": q("0")}},
		{"cpu rounds down to the milli-core", corev1.ResourceList{corev1.ResourceCPU: q("1001m")}, 90, corev1.ResourceList{corev1.ResourceCPU: q("900m")}},
		{"memory rounds down to the byte", corev1.ResourceList{corev1.ResourceMemory: q("1001")}, 90, corev1.ResourceList{corev1.ResourceMemory: q("900")}},
		{"hugepages are bytes", corev1.ResourceList{"hugepages-2Mi": q("10Mi")}, 50, corev1.ResourceList{"hugepages-2Mi": q("5Mi")}},
		{"100% is everything", corev1.ResourceList{corev1.ResourceCPU: q("7"), "example.com/fpga": q("3")}, 100, corev1.ResourceList{corev1.ResourceCPU: q("7"), "example.com/fpga": q("3")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Share(tc.free, tc.percent)
			if err != nil {
				t.Fatal(err)
			}
			if !equalLists(got, tc.want) {
				t.Fatalf("Share(%v, %d) = %v, want %v", tc.free, tc.percent, got, tc.want)
			}
		})
	}
}

func TestSharePercentageBounds(t *testing.T) {
	for _, p := range []int{-5, 0, 101} {
		if _, err := Share(corev1.ResourceList{}, p); err == nil || !strings.Contains(err.Error(), "between 1 and 100") {
			t.Errorf("Share with %d%%: %v, want an error naming the bounds", p, err)
		}
	}
}

func TestScaleDoesNotOverflow(t *testing.T) {
	if got := scale(math.MaxInt64, 100, false); got != math.MaxInt64 {
		t.Fatalf("scale(MaxInt64, 100) = %d", got)
	}
	if got := scale(math.MaxInt64, 50, false); got != math.MaxInt64/2 {
		t.Fatalf("scale(MaxInt64, 50) = %d, want %d", got, int64(math.MaxInt64/2))
	}
}

// FuzzShare checks the sharing invariants for any amount and percentage:
// never negative, never more than free, and whole units never round a free
// unit away.
func FuzzShare(f *testing.F) {
	f.Add(int64(1), 90)
	f.Add(int64(16200), 90)
	f.Add(int64(math.MaxInt64), 99)
	f.Fuzz(func(t *testing.T, v int64, percent int) {
		if v < 0 || percent < 1 || percent > 100 {
			return
		}
		for _, up := range []bool{false, true} {
			got := scale(v, percent, up)
			if got < 0 || got > v {
				t.Fatalf("scale(%d, %d, %v) = %d, outside [0, %d]", v, percent, up, got, v)
			}
			if up && v > 0 && got == 0 {
				t.Fatalf("scale(%d, %d, up) rounded a free unit to 0", v, percent)
			}
		}
	})
}

func TestFixedRequest(t *testing.T) {
	free := corev1.ResourceList{corev1.ResourceCPU: q("10"), corev1.ResourceMemory: q("8Gi")}
	got, err := Fixed(corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("16Gi")}, free)
	if err != nil {
		t.Fatal(err)
	}
	if !equalLists(got, corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("8Gi")}) {
		t.Fatalf("Fixed = %v, want cpu 4 and memory capped at 8Gi", got)
	}
	_, err = Fixed(corev1.ResourceList{"nvidia.com/gpu": q("1")}, free)
	if err == nil || !strings.Contains(err.Error(), "spec.resources") || !strings.Contains(err.Error(), "nvidia.com/gpu") || !strings.Contains(err.Error(), "cpu, memory") {
		t.Fatalf("unknown resource: %v, want an error naming the field, the resource and what is offered", err)
	}
}

func TestShapesGroupsAndOrdersLargestFirst(t *testing.T) {
	nodes := []corev1.Node{node("a", "8", "32Gi"), node("b", "8", "32Gi"), node("c", "32", "128Gi"), node("d", "8", "64Gi")}
	shapes := Shapes(ComputeFree(nodes, []corev1.Pod{pod("b", "8")}, nil))
	want := []struct {
		cpu, mem string
		count    int32
	}{{"32", "128Gi", 1}, {"8", "64Gi", 1}, {"8", "32Gi", 1}, {"0", "32Gi", 1}}
	if len(shapes) != len(want) {
		t.Fatalf("got %d shapes %v, want %d", len(shapes), shapes, len(want))
	}
	for i, w := range want {
		cpu, mem := shapes[i].Resources[corev1.ResourceCPU], shapes[i].Resources[corev1.ResourceMemory]
		if cpu.Cmp(q(w.cpu)) != 0 || mem.Cmp(q(w.mem)) != 0 || shapes[i].Count != w.count {
			t.Errorf("shape %d = cpu %s mem %s x%d, want cpu %s mem %s x%d", i, cpu.String(), mem.String(), shapes[i].Count, w.cpu, w.mem, w.count)
		}
	}
	many := make([]corev1.Node, 0, 20)
	for i := range 20 {
		many = append(many, node(string(rune('a'+i)), resource.NewQuantity(int64(i+1), resource.DecimalSI).String(), "1Gi"))
	}
	if got := Shapes(ComputeFree(many, nil, nil)); len(got) != MaxNodeShapes {
		t.Fatalf("20 distinct nodes gave %d shapes, want the largest %d", len(got), MaxNodeShapes)
	}
}

func TestSuggestedLabelsKeepWhatAllNodesShare(t *testing.T) {
	at := func(region, zone string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Labels = map[string]string{corev1.LabelTopologyRegion: region, corev1.LabelTopologyZone: zone}
		}
	}
	nodes := []corev1.Node{node("a", "1", "1Gi", at("eu-west", "eu-west-1a")), node("b", "1", "1Gi", at("eu-west", "eu-west-1b"))}
	got := SuggestedLabels(nodes, map[string]string{"ferry.io/provider": "acme"})
	want := map[string]string{corev1.LabelTopologyRegion: "eu-west", "ferry.io/provider": "acme"}
	if len(got) != len(want) || got[corev1.LabelTopologyRegion] != "eu-west" || got["ferry.io/provider"] != "acme" {
		t.Fatalf("SuggestedLabels = %v, want %v (zones differ, so no zone)", got, want)
	}
	one := SuggestedLabels(nodes[:1], nil)
	if one[corev1.LabelTopologyZone] != "eu-west-1a" {
		t.Fatalf("a single node's zone is not suggested: %v", one)
	}
	if got := SuggestedLabels([]corev1.Node{node("x", "1", "1Gi")}, nil); got != nil {
		t.Fatalf("unlabelled nodes suggest %v", got)
	}
}
