package offloading

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// virtualNodeFor is the consumer's virtual node standing for provider id,
// with extra labels given as key, value pairs.
func virtualNodeFor(id string, kv ...string) corev1.Node {
	labels := map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: id}
	for i := 0; i+1 < len(kv); i += 2 {
		labels[kv[i]] = kv[i+1]
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-" + id, Labels: labels}}
}

func selectorOf(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

func termOf(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestValidateNamespaceRefusesTheClustersOwnNamespaces(t *testing.T) {
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "ferry-system"} {
		if err := ValidateNamespace(ns); err == nil || !strings.Contains(err.Error(), "namespace "+ns+" may not be offloaded") {
			t.Errorf("%s: %v, want a refusal naming it", ns, err)
		}
	}
	for _, ns := range []string{"default", "shop", "kube-systemx", "ferry"} {
		if err := ValidateNamespace(ns); err != nil {
			t.Errorf("%s: %v, want it allowed", ns, err)
		}
	}
}

func TestSelectedClustersMatchVirtualNodeLabels(t *testing.T) {
	deleting := virtualNodeFor("leaving")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	nodes := []corev1.Node{
		virtualNodeFor("paris", "region", "eu", "tier", "gold"),
		virtualNodeFor("dublin", "region", "eu", "tier", "silver"),
		virtualNodeFor("ohio", "region", "us"),
		virtualNodeFor("home", "region", "eu"), // this cluster itself, peered both ways
		{ObjectMeta: metav1.ObjectMeta{Name: "real", Labels: map[string]string{"region": "eu", ferryv1alpha1.LabelClusterID: "real"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "no-id", Labels: map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}}},
		deleting,
	}
	for name, tc := range map[string]struct {
		sel  *corev1.NodeSelector
		want []ferryv1alpha1.ClusterID
	}{
		"nil selects every provider":   {nil, []ferryv1alpha1.ClusterID{"dublin", "ohio", "paris"}},
		"empty selects every provider": {selectorOf(), []ferryv1alpha1.ClusterID{"dublin", "ohio", "paris"}},
		"region=eu":                    {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn, "eu"))), []ferryv1alpha1.ClusterID{"dublin", "paris"}},
		"terms are ORed": {selectorOf(termOf(req("tier", corev1.NodeSelectorOpIn, "gold")), termOf(req("region", corev1.NodeSelectorOpIn, "us"))),
			[]ferryv1alpha1.ClusterID{"ohio", "paris"}},
		"expressions are ANDed": {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn, "eu"), req("tier", corev1.NodeSelectorOpNotIn, "gold"))),
			[]ferryv1alpha1.ClusterID{"dublin"}},
		"no tier label":                 {selectorOf(termOf(req("tier", corev1.NodeSelectorOpDoesNotExist))), []ferryv1alpha1.ClusterID{"ohio"}},
		"by cluster ID":                 {selectorOf(termOf(req(ferryv1alpha1.LabelClusterID, corev1.NodeSelectorOpIn, "ohio", "home"))), []ferryv1alpha1.ClusterID{"ohio"}},
		"nothing":                       {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn, "mars"))), nil},
		"an empty term matches nothing": {selectorOf(corev1.NodeSelectorTerm{}), nil},
	} {
		sel, err := placement.NewClusterSelector(tc.sel)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := selectedClusters(nodes, sel, "home"); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestVirtualNodeSelectionChangedIgnoresHeartbeats(t *testing.T) {
	p := virtualNodeSelectionChanged()
	vn := virtualNodeFor("paris", "region", "eu")
	relabelled := vn.DeepCopy()
	relabelled.Labels["region"] = "us"
	heartbeat := vn.DeepCopy()
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	real := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker", Labels: map[string]string{"region": "eu"}}}
	realRelabelled := real.DeepCopy()
	realRelabelled.Labels["region"] = "us"
	for name, tc := range map[string]struct {
		pass bool
		got  bool
	}{
		"a virtual node appears":         {true, p.Create(event.CreateEvent{Object: &vn})},
		"a virtual node goes":            {true, p.Delete(event.DeleteEvent{Object: &vn})},
		"a virtual node's labels change": {true, p.Update(event.UpdateEvent{ObjectOld: &vn, ObjectNew: relabelled})},
		"a virtual node's heartbeat":     {false, p.Update(event.UpdateEvent{ObjectOld: &vn, ObjectNew: heartbeat})},
		"a real node appears":            {false, p.Create(event.CreateEvent{Object: &real})},
		"a real node's labels change":    {false, p.Update(event.UpdateEvent{ObjectOld: &real, ObjectNew: realRelabelled})},
	} {
		if tc.got != tc.pass {
			t.Errorf("%s: passed=%t, want %t", name, tc.got, tc.pass)
		}
	}
}

func TestBoundPodDeletedPassesOnlyDeletionsOfBoundPods(t *testing.T) {
	p := boundPodDeleted()
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: "ferry-paris"}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "shop"}}
	if !p.Delete(event.DeleteEvent{Object: bound}) {
		t.Error("the deletion of a bound pod does not pass")
	}
	if p.Delete(event.DeleteEvent{Object: pending}) || p.Create(event.CreateEvent{Object: bound}) || p.Update(event.UpdateEvent{ObjectOld: bound, ObjectNew: bound}) {
		t.Error("an unbound pod's deletion, or a creation or update, passes")
	}
}
