package grant

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func labelled(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func TestPoolGrantsGroupAndSizeEachPoolFromItsOwnNodes(t *testing.T) {
	const key = "gpu-model"
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	nodes := []corev1.Node{
		node("a1", "8", "32Gi", labelled(key, "a100", corev1.LabelTopologyZone, "z1")),
		node("a2", "8", "32Gi", labelled(key, "a100", corev1.LabelTopologyZone, "z1")),
		node("t1", "2", "4Gi", labelled(key, "t4", corev1.LabelTopologyZone, "z2")),
		node("t2", "32", "64Gi", labelled(key, "t4"), cordoned), // not eligible: not in the pool
		node("plain", "16", "16Gi"),                    // no label: in no pool
		node("empty", "16", "16Gi", labelled(key, "")), // empty value: in no pool
	}
	pods := []corev1.Pod{pod("a1", "3"), pod("t1", "500m")}
	free := ComputeFree(nodes, pods, nil)
	grants, leftOut, err := PoolGrants(nodes, free, key, nil, 100, map[string]string{"ferry.io/provider": "acme"})
	if err != nil || len(leftOut) > 0 {
		t.Fatalf("PoolGrants: %v, left out %v", err, leftOut)
	}
	if len(grants) != 2 || grants[0].Value != "a100" || grants[1].Value != "t4" {
		t.Fatalf("pools = %+v, want a100 and t4, by value", grants)
	}
	a, t4 := grants[0], grants[1]
	if a.Nodes != 2 || t4.Nodes != 1 {
		t.Errorf("nodes per pool = %d, %d, want 2, 1", a.Nodes, t4.Nodes)
	}
	for _, c := range []struct {
		g    ferryv1alpha1.NodePoolGrant
		want string
	}{{a, "13"}, {t4, "1500m"}} {
		if got := c.g.Resources[corev1.ResourceCPU]; got.Cmp(q(c.want)) != 0 {
			t.Errorf("pool %s cpu = %s, want %s", c.g.Value, got.String(), c.want)
		}
	}
	if len(a.NodeShapes) != 2 || a.NodeShapes[0].Count != 1 || len(t4.NodeShapes) != 1 {
		t.Errorf("shapes: a100 %+v, t4 %+v: want a100's two nodes (8 and 5 cpu free), t4's one", a.NodeShapes, t4.NodeShapes)
	}
	if big := t4.NodeShapes[0].Resources[corev1.ResourceCPU]; big.Cmp(q("1500m")) != 0 {
		t.Errorf("t4's largest shape has %s cpu, want 1500m (the cordoned 32-cpu node is not in the pool)", big.String())
	}
	if a.Labels[key] != "a100" || a.Labels[corev1.LabelTopologyZone] != "z1" || a.Labels["ferry.io/provider"] != "acme" {
		t.Errorf("a100 labels = %v", a.Labels)
	}
	if t4.Labels[key] != "t4" || t4.Labels[corev1.LabelTopologyZone] != "z2" {
		t.Errorf("t4 labels = %v", t4.Labels)
	}
}

func TestAPoolWhoseNodesAreAllUnschedulableStaysGrantedNothing(t *testing.T) {
	const key = "pool"
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	virtual := labelled(ferryv1alpha1.LabelNodeType, ferryv1alpha1.NodeTypeVirtual, key, "v")
	nodes := []corev1.Node{
		node("a", "8", "8Gi", labelled(key, "a")),
		node("down", "8", "8Gi", labelled(key, "down"), notReady),
		node("virtual", "90", "90Gi", virtual), // a virtual node makes no pool
	}
	grants, _, err := PoolGrants(nodes, ComputeFree(nodes, nil, nil), key, nil, 90, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != 2 || grants[1].Value != "down" {
		t.Fatalf("pools = %+v, want a and down (a passing NotReady must not retire the pool's virtual node)", grants)
	}
	if cpu := grants[1].Resources[corev1.ResourceCPU]; grants[1].Nodes != 0 || !cpu.IsZero() || len(grants[1].NodeShapes) != 0 {
		t.Errorf("pool down: %d nodes, cpu %s, shapes %v; want nothing granted", grants[1].Nodes, cpu.String(), grants[1].NodeShapes)
	}
}

func TestPoolGrantsFixedRequestHoldsPerPoolCappedByItsFreeResources(t *testing.T) {
	const key = "pool"
	nodes := []corev1.Node{
		node("big", "16", "64Gi", labelled(key, "big")),
		node("small", "2", "4Gi", labelled(key, "small")),
	}
	free := ComputeFree(nodes, nil, nil)
	request := corev1.ResourceList{corev1.ResourceCPU: q("4"), "nvidia.com/gpu": q("1")}
	grants, _, err := PoolGrants(nodes, free, key, request, 50, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := grants[0].Resources[corev1.ResourceCPU]; got.Cmp(q("4")) != 0 {
		t.Errorf("big pool cpu = %s, want the request, 4", got.String())
	}
	if got := grants[1].Resources[corev1.ResourceCPU]; got.Cmp(q("2")) != 0 {
		t.Errorf("small pool cpu = %s, want its free 2", got.String())
	}
	if _, ok := grants[0].Resources["nvidia.com/gpu"]; ok {
		t.Error("a pool without GPUs was granted some")
	}
}

func TestPoolGrantsAreBounded(t *testing.T) {
	var nodes []corev1.Node
	for i := range ferryv1alpha1.MaxNodePools + 2 {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), "1", "1Gi", labelled("pool", fmt.Sprintf("p%02d", i))))
	}
	grants, leftOut, err := PoolGrants(nodes, ComputeFree(nodes, nil, nil), "pool", nil, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(grants) != ferryv1alpha1.MaxNodePools || len(leftOut) != 2 || leftOut[0] != fmt.Sprintf("p%02d", ferryv1alpha1.MaxNodePools) {
		t.Fatalf("%d pools granted, left out %v", len(grants), leftOut)
	}
}
