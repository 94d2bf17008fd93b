package grant

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// MaxNodeShapes bounds the node-shape summary of a grant.
const MaxNodeShapes = 8

// Free is what a provider's eligible nodes have unrequested, in total and
// per node.
type Free struct {
	// Total is the sum over eligible nodes of allocatable minus requests.
	Total corev1.ResourceList
	// PerNode is each eligible node's free resources, by node name.
	PerNode map[string]corev1.ResourceList
}

// Eligible says whether a node's resources may be shared: it is Ready,
// schedulable, not tainted against new pods, and not itself a virtual node
// (two clusters peered both ways must not share each other's grants).
func Eligible(n *corev1.Node) bool {
	if n.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual || n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ComputeFree sums, over eligible nodes, allocatable minus the requests of
// the pods bound to them that still hold resources. Pods for which
// countPod returns false are not subtracted: a consumer's own offloaded pods
// are part of its grant, not competition for it.
func ComputeFree(nodes []corev1.Node, pods []corev1.Pod, countPod func(*corev1.Pod) bool) Free {
	free := Free{Total: corev1.ResourceList{}, PerNode: map[string]corev1.ResourceList{}}
	for i := range nodes {
		if Eligible(&nodes[i]) {
			free.PerNode[nodes[i].Name] = nodes[i].Status.Allocatable.DeepCopy()
		}
	}
	for i := range pods {
		p := &pods[i]
		nodeFree, ok := free.PerNode[p.Spec.NodeName]
		if !ok || terminal(p) || (countPod != nil && !countPod(p)) {
			continue
		}
		for name, q := range PodRequests(p) {
			if have, ok := nodeFree[name]; ok {
				have.Sub(q)
				nodeFree[name] = have
			}
		}
	}
	for _, nodeFree := range free.PerNode {
		for name, q := range nodeFree {
			if q.Sign() < 0 { // overcommitted: nothing free, not a debt
				q = *resource.NewQuantity(0, q.Format)
				nodeFree[name] = q
			}
			total := free.Total[name]
			total.Add(q)
			free.Total[name] = total
		}
	}
	return free
}

// PodRequests is what a pod holds on its node, as the scheduler counts it
// (k8s.io/component-helpers): its containers' requests, or its largest init
// container step when that is more, with restartable init containers
// (sidecars) running alongside, pod-level requests when set, the larger of
// spec and status while a resize is in flight, plus overhead; and one
// "pods" slot.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})
	reqs[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return reqs
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Share is percent of free, resource by resource:
//   - divisible resources (cpu to the milli-core; memory, ephemeral-storage
//     and hugepages to the byte) are rounded down;
//   - whole-unit resources (pods and every extended resource, e.g. GPUs)
//     are rounded up, so one free GPU at 90% is shared as 1, never as 0.
//     Rounding up never shares more than is free.
func Share(free corev1.ResourceList, percent int) (corev1.ResourceList, error) {
	if percent < 1 || percent > 100 {
		return nil, fmt.Errorf("sharing percentage %d: must be between 1 and 100", percent)
	}
	out := corev1.ResourceList{}
	for name, q := range free {
		switch {
		case name == corev1.ResourceCPU:
			out[name] = *resource.NewMilliQuantity(scale(q.MilliValue(), percent, false), q.Format)
		case divisible(name):
			out[name] = *resource.NewQuantity(scale(q.Value(), percent, false), q.Format)
		default:
			out[name] = *resource.NewQuantity(scale(q.Value(), percent, true), q.Format)
		}
	}
	return out, nil
}

// scale is v*percent/100 in integers without overflow, rounded down or up.
func scale(v int64, percent int, up bool) int64 {
	p := int64(percent)
	q, r := v/100*p, v%100*p
	q += r / 100
	if up && r%100 != 0 {
		q++
	}
	return q
}

func divisible(name corev1.ResourceName) bool {
	return name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// Fixed grants a fixed request up to what is free. A resource no eligible
// node offers is an error naming it, rather than a silent zero.
func Fixed(request, free corev1.ResourceList) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	var unknown []string
	for name, want := range request {
		have, ok := free[name]
		if !ok {
			unknown = append(unknown, string(name))
			continue
		}
		if want.Cmp(have) > 0 {
			out[name] = have.DeepCopy()
		} else {
			out[name] = want.DeepCopy()
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		offered := make([]string, 0, len(free))
		for name := range free {
			offered = append(offered, string(name))
		}
		slices.Sort(offered)
		return nil, fmt.Errorf("spec.resources: the provider offers no %s (it offers %s)", strings.Join(unknown, ", "), strings.Join(offered, ", "))
	}
	return out, nil
}

// Shapes summarizes the free resources of eligible nodes as groups of equal
// shapes, largest first (by CPU, then memory), at most MaxNodeShapes groups.
func Shapes(free Free) []ferryv1alpha1.NodeShape {
	var shapes []ferryv1alpha1.NodeShape
	names := make([]string, 0, len(free.PerNode))
	for name := range free.PerNode {
		names = append(names, name)
	}
	slices.Sort(names) // deterministic output: no write when nothing changed
next:
	for _, name := range names {
		res := free.PerNode[name]
		for i := range shapes {
			if equalLists(shapes[i].Resources, res) {
				shapes[i].Count++
				continue next
			}
		}
		shapes = append(shapes, ferryv1alpha1.NodeShape{Resources: res.DeepCopy(), Count: 1})
	}
	slices.SortStableFunc(shapes, func(a, b ferryv1alpha1.NodeShape) int {
		if c := cmpRes(b.Resources, a.Resources, corev1.ResourceCPU); c != 0 {
			return c
		}
		if c := cmpRes(b.Resources, a.Resources, corev1.ResourceMemory); c != 0 {
			return c
		}
		return cmp.Compare(b.Count, a.Count)
	})
	if len(shapes) > MaxNodeShapes {
		shapes = shapes[:MaxNodeShapes]
	}
	return shapes
}

func cmpRes(a, b corev1.ResourceList, name corev1.ResourceName) int {
	qa, qb := a[name], b[name]
	return qa.Cmp(qb)
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if other, ok := b[name]; !ok || q.Cmp(other) != 0 {
			return false
		}
	}
	return true
}

// topologyLabels are the node labels a grant suggests for the virtual node
// when every eligible node of the provider agrees on them.
var topologyLabels = []string{corev1.LabelTopologyRegion, corev1.LabelTopologyZone}

// SuggestedLabels are labels for the virtual node: the region and zone that
// all eligible nodes share (a provider spread over zones suggests its region
// only), plus the provider's own labels (e.g. ferry.io/provider=aws), which
// win over the derived ones.
func SuggestedLabels(nodes []corev1.Node, own map[string]string) map[string]string {
	out := map[string]string{}
	for _, key := range topologyLabels {
		value, agreed := "", true
		for i := range nodes {
			if !Eligible(&nodes[i]) {
				continue
			}
			v := nodes[i].Labels[key]
			if v == "" || (value != "" && v != value) {
				agreed = false
				break
			}
			value = v
		}
		if agreed && value != "" {
			out[key] = value
		}
	}
	for k, v := range own {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
