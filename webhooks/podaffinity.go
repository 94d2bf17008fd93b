package webhooks

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Node requirements of the two kinds of nodes: ferry's virtual nodes carry
// ferry.io/type=virtual-node; real nodes do not (NotIn also matches nodes
// without the label).
var (
	virtualNodeRequirement = corev1.NodeSelectorRequirement{
		Key: ferryv1alpha1.LabelNodeType, Operator: corev1.NodeSelectorOpIn, Values: []string{ferryv1alpha1.NodeTypeVirtual}}
	realNodeRequirement = corev1.NodeSelectorRequirement{
		Key: ferryv1alpha1.LabelNodeType, Operator: corev1.NodeSelectorOpNotIn, Values: []string{ferryv1alpha1.NodeTypeVirtual}}
)

// PolicyTerms are the node selector terms (ORed) a pod of a namespace
// offloaded with strategy and clusterSelector may be placed by: Local, the
// real nodes; Remote, the virtual nodes matching one of the selector's terms
// (every virtual node without a selector); LocalAndRemote, either.
func PolicyTerms(strategy ferryv1alpha1.PodOffloadingStrategy, clusterSelector *corev1.NodeSelector) []corev1.NodeSelectorTerm {
	local := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{realNodeRequirement}}
	var remote []corev1.NodeSelectorTerm
	if clusterSelector == nil || len(clusterSelector.NodeSelectorTerms) == 0 {
		remote = []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{virtualNodeRequirement}}}
	} else {
		for _, t := range clusterSelector.NodeSelectorTerms {
			t = *t.DeepCopy()
			t.MatchExpressions = append([]corev1.NodeSelectorRequirement{virtualNodeRequirement}, t.MatchExpressions...)
			remote = append(remote, t)
		}
	}
	switch strategy {
	case ferryv1alpha1.PodOffloadingLocal:
		return []corev1.NodeSelectorTerm{local}
	case ferryv1alpha1.PodOffloadingRemote:
		return remote
	default:
		return append([]corev1.NodeSelectorTerm{local}, remote...)
	}
}

// MergeRequired is the pod's required node selector once policy applies to
// it. A NodeSelector's terms are ORed and each term's requirements ANDed, so
// the result is every existing term ANDed with every policy term: a node
// passes when it passes the user's selector and the policy. A user's
// selector without terms is replaced by the policy. Merging what is already
// merged changes nothing (the webhook may be invoked again): when every
// existing term already holds the requirements of a policy term, existing is
// returned as it is.
func MergeRequired(existing *corev1.NodeSelector, policy []corev1.NodeSelectorTerm) *corev1.NodeSelector {
	if existing == nil || len(existing.NodeSelectorTerms) == 0 {
		return &corev1.NodeSelector{NodeSelectorTerms: cloneTerms(policy)}
	}
	if alreadyMerged(existing.NodeSelectorTerms, policy) {
		return existing.DeepCopy()
	}
	out := &corev1.NodeSelector{}
	for _, e := range existing.NodeSelectorTerms {
		for _, p := range policy {
			t := *e.DeepCopy()
			for _, r := range p.MatchExpressions {
				if !containsRequirement(t.MatchExpressions, r) {
					t.MatchExpressions = append(t.MatchExpressions, *r.DeepCopy())
				}
			}
			for _, r := range p.MatchFields {
				if !containsRequirement(t.MatchFields, r) {
					t.MatchFields = append(t.MatchFields, *r.DeepCopy())
				}
			}
			if !slices.ContainsFunc(out.NodeSelectorTerms, func(o corev1.NodeSelectorTerm) bool { return equality.Semantic.DeepEqual(o, t) }) {
				out.NodeSelectorTerms = append(out.NodeSelectorTerms, t)
			}
		}
	}
	return out
}

// alreadyMerged: every term holds all requirements of at least one policy
// term.
func alreadyMerged(terms, policy []corev1.NodeSelectorTerm) bool {
	for _, t := range terms {
		if !slices.ContainsFunc(policy, func(p corev1.NodeSelectorTerm) bool { return holds(t, p) }) {
			return false
		}
	}
	return true
}

func holds(t, p corev1.NodeSelectorTerm) bool {
	for _, r := range p.MatchExpressions {
		if !containsRequirement(t.MatchExpressions, r) {
			return false
		}
	}
	for _, r := range p.MatchFields {
		if !containsRequirement(t.MatchFields, r) {
			return false
		}
	}
	return true
}

func containsRequirement(list []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
	return slices.ContainsFunc(list, func(x corev1.NodeSelectorRequirement) bool {
		return x.Key == r.Key && x.Operator == r.Operator && slices.Equal(sortedCopy(x.Values), sortedCopy(r.Values))
	})
}

func sortedCopy(v []string) []string {
	c := slices.Clone(v)
	slices.Sort(c)
	return c
}

func cloneTerms(in []corev1.NodeSelectorTerm) []corev1.NodeSelectorTerm {
	out := make([]corev1.NodeSelectorTerm, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
