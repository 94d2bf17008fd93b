package placement

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// AnnotationPodDeletionCost is the ReplicaSet controller's scale-down
// order: of two ready pods, the one with the lower cost is deleted first.
const AnnotationPodDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// AnnotationDeletionCostSet, on a pod, records the pod-deletion-cost ferry
// set on it: ferry changes or removes a cost only while it is still the one
// it set, so a user's own cost is never overwritten.
const AnnotationDeletionCostSet = "ferry.io/pod-deletion-cost"

// OffloadedDeletionCost is the magnitude of the cost offloaded pods carry
// under a preference (local pods have none, i.e. 0).
const OffloadedDeletionCost = 100

// Preference is the preference a namespace's pods are placed by: the
// NamespaceOffloading's, and None for a pod that may not run on both sides
// (a Local or Remote strategy, its own or its namespace's) or for an empty
// value (the API's default).
func Preference(strategy ferryv1alpha1.PodOffloadingStrategy, pref ferryv1alpha1.PlacementPreference) ferryv1alpha1.PlacementPreference {
	if pref == "" || (strategy != ferryv1alpha1.PodOffloadingLocalAndRemote && strategy != "") {
		return ferryv1alpha1.PlacementPreferenceNone
	}
	return pref
}

// PrefersNode says how a preference ranks node: 1 for the side it
// prefers, 0 for the other, and ok false when it has no preference.
func PrefersNode(pref ferryv1alpha1.PlacementPreference, node *corev1.Node) (preferred, ok bool) {
	switch pref {
	case ferryv1alpha1.PlacementPreferenceLocalFirst:
		return !IsVirtualNode(node), true
	case ferryv1alpha1.PlacementPreferenceRemoteFirst:
		return IsVirtualNode(node), true
	}
	return false, false
}

// PreferredNodeTerm is the preferred node affinity term pointing a pod of a
// preference toward the side it prefers (real nodes: no ferry.io/type
// virtual-node label; virtual nodes: that label), nil for None.
func PreferredNodeTerm(pref ferryv1alpha1.PlacementPreference) *corev1.PreferredSchedulingTerm {
	var op corev1.NodeSelectorOperator
	switch pref {
	case ferryv1alpha1.PlacementPreferenceLocalFirst:
		op = corev1.NodeSelectorOpNotIn
	case ferryv1alpha1.PlacementPreferenceRemoteFirst:
		op = corev1.NodeSelectorOpIn
	default:
		return nil
	}
	return &corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
		Key: ferryv1alpha1.LabelNodeType, Operator: op, Values: []string{ferryv1alpha1.NodeTypeVirtual},
	}}}}
}

// OffloadedDeletionCostFor is the pod-deletion-cost an offloaded pod of a
// preference carries: lower than a local pod's (0) with LocalFirst, so the
// offloaded pods go first on scale-down, higher with RemoteFirst; ok false
// for None (no cost).
func OffloadedDeletionCostFor(pref ferryv1alpha1.PlacementPreference) (cost string, ok bool) {
	switch pref {
	case ferryv1alpha1.PlacementPreferenceLocalFirst:
		return strconv.Itoa(-OffloadedDeletionCost), true
	case ferryv1alpha1.PlacementPreferenceRemoteFirst:
		return strconv.Itoa(OffloadedDeletionCost), true
	}
	return "", false
}

// WithDeletionCost returns annotations with the pod-deletion-cost of an
// offloaded pod of pref, and changed whether that differs from annotations
// (which are then left as they are: the caller copies). A cost ferry did
// not set (AnnotationDeletionCostSet absent or different) is the user's and
// kept; ferry's own is replaced, or removed for None.
func WithDeletionCost(annotations map[string]string, pref ferryv1alpha1.PlacementPreference) (out map[string]string, changed bool) {
	cost, want := OffloadedDeletionCostFor(pref)
	current, has := annotations[AnnotationPodDeletionCost]
	set, ours := annotations[AnnotationDeletionCostSet]
	if has && (!ours || set != current) {
		return annotations, false // the user's
	}
	if want && has && current == cost && ours {
		return annotations, false
	}
	if !want && !has && !ours {
		return annotations, false
	}
	out = make(map[string]string, len(annotations)+2)
	for k, v := range annotations {
		out[k] = v
	}
	delete(out, AnnotationPodDeletionCost)
	delete(out, AnnotationDeletionCostSet)
	if want {
		out[AnnotationPodDeletionCost], out[AnnotationDeletionCostSet] = cost, cost
	}
	return out, true
}
