package offloading

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// setOffloadingConditions sets ClustersSelected and Ready of a valid
// NamespaceOffloading from the clusters selected and their twins' state in
// status.Clusters. Ready is True when every selected cluster's twin is
// Ready under the name the mapping strategy asks for; its message then
// also tells where pods may run (podOffloadingStrategy), which ferry's
// webhook and scheduler enforce.
func setOffloadingConditions(status *ferryv1alpha1.NamespaceOffloadingStatus, spec *ferryv1alpha1.NamespaceOffloadingSpec, selected []ferryv1alpha1.ClusterID, want string, generation int64) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		setCondition(status, generation, t, s, reason, msg)
	}
	if len(selected) == 0 {
		msg := "no peered cluster's virtual node matches spec.clusterSelector"
		if spec.ClusterSelector == nil || len(spec.ClusterSelector.NodeSelectorTerms) == 0 {
			msg = "no cluster is peered as a provider"
		}
		set(ferryv1alpha1.NamespaceOffloadingClustersSelected, metav1.ConditionFalse, ReasonNoClusterSelected, msg)
		set(ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonNoClusterSelected, msg)
		return
	}
	set(ferryv1alpha1.NamespaceOffloadingClustersSelected, metav1.ConditionTrue, ReasonClustersSelected, joinIDs(selected))

	var renamed, failed, waiting []string
	var failure *metav1.Condition
	for _, c := range status.Clusters {
		if !slices.Contains(selected, c.ClusterID) {
			continue
		}
		ready := meta.FindStatusCondition(c.Conditions, ferryv1alpha1.ConditionReady)
		switch {
		case c.TwinNamespace != "" && c.TwinNamespace != want && c.Phase != ferryv1alpha1.OffloadingFailed:
			renamed = append(renamed, fmt.Sprintf("%s in %s", c.TwinNamespace, c.ClusterID))
		case c.Phase == ferryv1alpha1.OffloadingFailed:
			failed = append(failed, describeCluster(&c))
			if failure == nil && ready != nil {
				failure = ready
			}
		case c.Phase != ferryv1alpha1.OffloadingReady || ready == nil || ready.Status != metav1.ConditionTrue:
			waiting = append(waiting, describeCluster(&c))
		}
	}
	switch {
	case len(renamed) > 0:
		set(ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonNamespaceMappingChanged, fmt.Sprintf(
			"twin namespaces exist as %s, but spec.namespaceMappingStrategy %s now names them %s; no second twin is made: unoffload (delete this NamespaceOffloading) and offload again to rename",
			strings.Join(renamed, ", "), mappingStrategy(spec), want))
	case len(failed) > 0:
		reason := ReasonClustersNotReady
		if failure != nil && failure.Reason != "" {
			reason = failure.Reason // e.g. NamespaceConflict: the provider's own word
		}
		msg := "failed: " + strings.Join(failed, "; ")
		if everySelectedFailed(status.Clusters, selected) {
			msg += fmt.Sprintf("; the namespace is not labelled %s, so its new pods run on this cluster's nodes; the offloading proceeds once a provider gives the twin namespace",
				ferryv1alpha1.LabelOffloadingEnabled)
		}
		set(ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, reason, msg)
	case len(waiting) > 0:
		set(ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionFalse, ReasonClustersNotReady, "waiting for "+strings.Join(waiting, "; "))
	default:
		set(ferryv1alpha1.NamespaceOffloadingReady, metav1.ConditionTrue, ReasonReady, fmt.Sprintf(
			"twin namespace %s ready in %s; pods: %s", want, joinIDs(selected), podPlacement(spec.PodOffloadingStrategy)))
	}
}

// everySelectedFailed tells whether every selected cluster refused the
// twin namespace (phase Failed), so that no pod of the namespace can run
// remotely. With none selected it is false: the namespace waits for a
// provider to peer or to match, as its policy says.
func everySelectedFailed(clusters []ferryv1alpha1.ClusterOffloadingStatus, selected []ferryv1alpha1.ClusterID) bool {
	if len(selected) == 0 {
		return false
	}
	for _, id := range selected {
		i := slices.IndexFunc(clusters, func(c ferryv1alpha1.ClusterOffloadingStatus) bool { return c.ClusterID == id })
		if i < 0 || clusters[i].Phase != ferryv1alpha1.OffloadingFailed {
			return false
		}
	}
	return true
}

// podPlacement says in words where podOffloadingStrategy lets pods run.
func podPlacement(s ferryv1alpha1.PodOffloadingStrategy) string {
	switch s {
	case ferryv1alpha1.PodOffloadingLocal:
		return "Local (this cluster's nodes only)"
	case ferryv1alpha1.PodOffloadingRemote:
		return "Remote (the selected clusters only)"
	default:
		return "LocalAndRemote (this cluster's nodes and the selected clusters)"
	}
}

func mappingStrategy(spec *ferryv1alpha1.NamespaceOffloadingSpec) ferryv1alpha1.NamespaceMappingStrategy {
	if spec.NamespaceMappingStrategy == "" {
		return ferryv1alpha1.NamespaceMappingDefaultName
	}
	return spec.NamespaceMappingStrategy
}

// describeCluster is "<id> (<phase>[, <reason>: <message>])".
func describeCluster(c *ferryv1alpha1.ClusterOffloadingStatus) string {
	s := fmt.Sprintf("%s (%s", c.ClusterID, c.Phase)
	if ready := meta.FindStatusCondition(c.Conditions, ferryv1alpha1.ConditionReady); ready != nil && ready.Status != metav1.ConditionTrue {
		s += ", " + ready.Reason
		if ready.Message != "" {
			s += ": " + ready.Message
		}
	}
	return s + ")"
}

func setCondition(status *ferryv1alpha1.NamespaceOffloadingStatus, generation int64, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// setClusterCondition sets a cluster's Ready condition; a condition copied
// from the provider's TwinNamespace keeps its reason and message, with the
// NamespaceOffloading's generation.
func setClusterCondition(c *ferryv1alpha1.ClusterOffloadingStatus, generation int64, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.Conditions, metav1.Condition{Type: ferryv1alpha1.ConditionReady, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
}

// sortedClusters is the status' cluster list, by ClusterID.
func sortedClusters(m map[ferryv1alpha1.ClusterID]ferryv1alpha1.ClusterOffloadingStatus) []ferryv1alpha1.ClusterOffloadingStatus {
	out := make([]ferryv1alpha1.ClusterOffloadingStatus, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ferryv1alpha1.ClusterOffloadingStatus) int {
		return strings.Compare(string(a.ClusterID), string(b.ClusterID))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

func clusterList(cs []ferryv1alpha1.ClusterOffloadingStatus) string {
	ids := make([]ferryv1alpha1.ClusterID, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.ClusterID)
	}
	return joinIDs(ids)
}

func joinIDs(ids []ferryv1alpha1.ClusterID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ", ")
}
