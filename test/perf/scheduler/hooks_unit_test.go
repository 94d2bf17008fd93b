package scheduler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// The placement check must catch what it is there for: these cases are the
// misplacements a broken plugin would produce.
func TestPolicyViolation(t *testing.T) {
	virtual := func(cluster, region string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "v", Labels: map[string]string{
			ferryv1alpha1.LabelNodeType:     ferryv1alpha1.NodeTypeVirtual,
			ferryv1alpha1.LabelClusterID:    cluster,
			"topology.kubernetes.io/region": region,
		}}}
	}
	realNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "r"}}
	nso := func(s ferryv1alpha1.PodOffloadingStrategy, region string) *ferryv1alpha1.NamespaceOffloading {
		n := &ferryv1alpha1.NamespaceOffloading{Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: s}}
		if region != "" {
			n.Spec.ClusterSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/region", Operator: corev1.NodeSelectorOpIn, Values: []string{region}}},
			}}}
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		nso    *ferryv1alpha1.NamespaceOffloading
		node   *corev1.Node
		broken bool
	}{
		{"not offloaded, real node", nil, realNode, false},
		{"not offloaded, virtual node", nil, virtual("c1", "r0"), true},
		{"Remote on a real node", nso(ferryv1alpha1.PodOffloadingRemote, ""), realNode, true},
		{"Remote on any virtual node", nso(ferryv1alpha1.PodOffloadingRemote, ""), virtual("c1", "r0"), false},
		{"Remote on a selected virtual node", nso(ferryv1alpha1.PodOffloadingRemote, "r0"), virtual("c1", "r0"), false},
		{"Remote on an unselected virtual node", nso(ferryv1alpha1.PodOffloadingRemote, "r0"), virtual("c2", "r1"), true},
		{"Local on a virtual node", nso(ferryv1alpha1.PodOffloadingLocal, ""), virtual("c1", "r0"), true},
		{"LocalAndRemote on a real node", nso(ferryv1alpha1.PodOffloadingLocalAndRemote, "r0"), realNode, false},
		{"LocalAndRemote on an unselected virtual node", nso(ferryv1alpha1.PodOffloadingLocalAndRemote, "r0"), virtual("c2", "r1"), true},
		{"default strategy on a real node", nso("", "r0"), realNode, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			isVirtual := tc.node.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual
			if msg := policyViolation(tc.nso, tc.node, isVirtual); (msg != "") != tc.broken {
				t.Errorf("violation %q, want one: %v", msg, tc.broken)
			}
		})
	}
}
