package clusterselector

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Excludes says why the pod's namespace policy keeps the pod out of cluster
// as a whole (this cluster, placement.LocalCluster, or a provider whose
// virtual nodes are nodes), with the reason Filter would give on each of its
// nodes; "" when the pod may run on one of them, or when the policy alone
// does not decide (not synced, invalid: PreFilter reports those). Another
// plugin that already knows which cluster a pod must run in (DataGravity)
// uses it to say so, instead of the framework's count of nodes that no two
// plugins' node sets share. O(nodes) selector matches.
func (p *Policies) Excludes(pod *corev1.Pod, cluster ferryv1alpha1.ClusterID, nodes []*corev1.Node) string {
	if p == nil || !p.HasSynced() {
		return ""
	}
	policy := p.Get(pod.Namespace)
	if cluster == placement.LocalCluster {
		if policy == nil || policy.SelectorErr != nil {
			return ""
		}
		strategy, err := placement.PodStrategyWithRuntimeClass(policy.Strategy, pod.Annotations, pod.Spec.RuntimeClassName)
		if err == nil && strategy == ferryv1alpha1.PodOffloadingRemote {
			return ReasonRemoteOnly
		}
		return ""
	}
	if len(nodes) == 0 {
		return ""
	}
	if policy == nil {
		return ReasonNotOffloaded
	}
	if policy.SelectorErr != nil {
		return ""
	}
	strategy, err := placement.PodStrategyWithRuntimeClass(policy.Strategy, pod.Annotations, pod.Spec.RuntimeClassName)
	switch {
	case err != nil:
		return ""
	case strategy == ferryv1alpha1.PodOffloadingLocal:
		return ReasonLocalOnly
	}
	for _, n := range nodes {
		if policy.Selector.Matches(n) {
			return ""
		}
	}
	return ReasonNotSelected
}
