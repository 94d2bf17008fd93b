package webhooks

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// nodes of every kind the policies tell apart.
var testNodes = []*corev1.Node{
	node("real-ssd", map[string]string{"disk": "ssd", "region": "eu"}),
	node("real-hdd", map[string]string{"disk": "hdd", "region": "us"}),
	node("real-bare", nil),
	node("virtual-eu", map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, "region": "eu", "disk": "ssd"}),
	node("virtual-us", map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, "region": "us"}),
}

func matches(t *testing.T, sel *corev1.NodeSelector, n *corev1.Node) bool {
	t.Helper()
	if sel == nil {
		return true
	}
	ns, err := nodeaffinity.NewNodeSelector(sel)
	if err != nil {
		t.Fatalf("invalid selector %v: %v", sel, err)
	}
	return ns.Match(n)
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestPolicyTermsAllowTheRightNodes(t *testing.T) {
	eu := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "eu")}}}}
	tests := []struct {
		strategy ferryv1alpha1.PodOffloadingStrategy
		selector *corev1.NodeSelector
		allowed  []string
	}{
		{ferryv1alpha1.PodOffloadingLocal, eu, []string{"real-ssd", "real-hdd", "real-bare"}},
		{ferryv1alpha1.PodOffloadingRemote, nil, []string{"virtual-eu", "virtual-us"}},
		{ferryv1alpha1.PodOffloadingRemote, eu, []string{"virtual-eu"}},
		{ferryv1alpha1.PodOffloadingLocalAndRemote, eu, []string{"real-ssd", "real-hdd", "real-bare", "virtual-eu"}},
		{ferryv1alpha1.PodOffloadingLocalAndRemote, &corev1.NodeSelector{}, []string{"real-ssd", "real-hdd", "real-bare", "virtual-eu", "virtual-us"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.strategy, tt.selector != nil), func(t *testing.T) {
			sel := &corev1.NodeSelector{NodeSelectorTerms: PolicyTerms(tt.strategy, tt.selector)}
			var got []string
			for _, n := range testNodes {
				if matches(t, sel, n) {
					got = append(got, n.Name)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.allowed) {
				t.Errorf("allowed %v, want %v", got, tt.allowed)
			}
		})
	}
	if eu.NodeSelectorTerms[0].MatchExpressions[0].Key != "region" || len(eu.NodeSelectorTerms[0].MatchExpressions) != 1 {
		t.Errorf("PolicyTerms modified the NamespaceOffloading's selector: %v", eu)
	}
}

// TestMergeRequiredIsTheIntersection checks, node by node, that the merged
// selector admits exactly the nodes both the user's selector and the policy
// admit, and that merging again changes nothing.
func TestMergeRequiredIsTheIntersection(t *testing.T) {
	euSelector := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "eu")}}}}
	users := map[string]*corev1.NodeSelector{
		"none":           nil,
		"no terms":       {},
		"ssd":            {NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, "ssd")}}}},
		"ssd or us":      {NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req("disk", corev1.NodeSelectorOpIn, "ssd")}}, {MatchExpressions: []corev1.NodeSelectorRequirement{req("region", corev1.NodeSelectorOpIn, "us")}}}},
		"field real-hdd": {NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "real-hdd")}}}},
		"virtual only":   {NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{virtualNodeRequirement}}}},
	}
	for _, strategy := range []ferryv1alpha1.PodOffloadingStrategy{ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PodOffloadingLocalAndRemote} {
		for _, cs := range []*corev1.NodeSelector{nil, euSelector} {
			policyTerms := PolicyTerms(strategy, cs)
			policy := &corev1.NodeSelector{NodeSelectorTerms: policyTerms}
			for name, user := range users {
				t.Run(fmt.Sprintf("%s/selector=%v/%s", strategy, cs != nil, name), func(t *testing.T) {
					var before *corev1.NodeSelector
					if user != nil {
						before = user.DeepCopy()
					}
					merged := MergeRequired(user, policyTerms)
					for _, n := range testNodes {
						userOK := user == nil || len(user.NodeSelectorTerms) == 0 || matches(t, user, n)
						want := userOK && matches(t, policy, n)
						if got := matches(t, merged, n); got != want {
							t.Errorf("node %s: merged admits %v, want %v (user %v, policy %v)", n.Name, got, want, userOK, !userOK || want)
						}
					}
					again := MergeRequired(merged, policyTerms)
					if fmt.Sprint(again) != fmt.Sprint(merged) {
						t.Errorf("merging twice changed the selector:\n%v\n%v", merged, again)
					}
					if user != nil && fmt.Sprint(user) != fmt.Sprint(before) {
						t.Errorf("MergeRequired modified its input")
					}
				})
			}
		}
	}
}
