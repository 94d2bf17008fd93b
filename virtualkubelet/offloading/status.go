package offloading

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons of the local pod's ferry.io/Offloaded condition.
const (
	// ReasonRunningRemotely: the provider runs the pod.
	ReasonRunningRemotely = "RunningRemotely"
	// ReasonNamespaceNotOffloaded: the pod's namespace has no Ready twin
	// namespace in the provider behind the node it was bound to.
	ReasonNamespaceNotOffloaded = "NamespaceNotOffloaded"
	// ReasonOffloadingRefused: ferry does not offload such a pod (host
	// namespaces, host paths); the pod fails, as a kubelet refusing it would.
	ReasonOffloadingRefused = "OffloadingRefused"
	// ReasonShadowPodRejected: the provider refused the ShadowPod.
	ReasonShadowPodRejected = "ShadowPodRejected"
)

// IPRemapper translates a pod IP of the provider into the address the
// consumer reaches it at, "" when it cannot reach it. The network fabric
// provides it; without one, IPs are kept as they are.
type IPRemapper func(ip string) string

// statusFromRemote is the local pod's status while the provider runs remote:
// the remote status (phase, conditions, container statuses, start time, IPs
// remapped), restart counts increased by the remote recreations, and the
// fields only the consumer may set kept from local.
func statusFromRemote(local *corev1.Pod, remote *corev1.Pod, recreations int32, provider ferryv1alpha1.ClusterID, remap IPRemapper) corev1.PodStatus {
	st := *remote.Status.DeepCopy()
	st.HostIP, st.HostIPs = "", nil
	if remap != nil {
		// An IP the fabric cannot map (not yet, or never: a host-network
		// pod's node address) is left out rather than shown unreachable;
		// podIP stays podIPs[0], as the API requires.
		ips := st.PodIPs
		if len(ips) == 0 && st.PodIP != "" {
			ips = []corev1.PodIP{{IP: st.PodIP}}
		}
		st.PodIP, st.PodIPs = "", nil
		for _, ip := range ips {
			if mapped := remap(ip.IP); mapped != "" {
				st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: mapped})
			}
		}
		if len(st.PodIPs) > 0 {
			st.PodIP = st.PodIPs[0].IP
		}
	}
	// The consumer's own fields: QoS class is immutable and computed from the
	// local spec; nomination, resize and claims are the consumer's business.
	st.QOSClass = local.Status.QOSClass
	st.NominatedNodeName = local.Status.NominatedNodeName
	st.Resize = local.Status.Resize
	st.ResourceClaimStatuses = local.Status.ResourceClaimStatuses
	st.ExtendedResourceClaimStatus = local.Status.ExtendedResourceClaimStatus
	// Generations are the local pod's: the remote one counts remote updates.
	if st.ObservedGeneration != 0 {
		st.ObservedGeneration = local.Generation
	}
	for i := range st.Conditions {
		if st.Conditions[i].ObservedGeneration != 0 {
			st.Conditions[i].ObservedGeneration = local.Generation
		}
	}
	if recreations > 0 {
		for i := range st.ContainerStatuses {
			st.ContainerStatuses[i].RestartCount += recreations
		}
		for i := range st.InitContainerStatuses {
			st.InitContainerStatuses[i].RestartCount += recreations
		}
	}
	st.Conditions = withOffloadedCondition(local, st.Conditions, corev1.ConditionTrue, ReasonRunningRemotely,
		fmt.Sprintf("running in cluster %s as %s/%s", provider, remote.Namespace, remote.Name))
	return st
}

// statusWithCondition is the local pod's status with only the Offloaded
// condition changed, e.g. to say why the pod does not run remotely yet.
func statusWithCondition(local *corev1.Pod, status corev1.ConditionStatus, reason, message string) corev1.PodStatus {
	st := *local.Status.DeepCopy()
	st.Conditions = withOffloadedCondition(local, st.Conditions, status, reason, message)
	return st
}

// withOffloadedCondition sets ferry's condition in conditions, keeping its
// transition time from the local pod when its status does not change.
func withOffloadedCondition(local *corev1.Pod, conditions []corev1.PodCondition, status corev1.ConditionStatus, reason, message string) []corev1.PodCondition {
	cond := corev1.PodCondition{Type: ferryv1alpha1.PodConditionOffloaded, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.Now().Rfc3339Copy()}
	if old := offloadedCondition(local); old != nil && old.Status == status {
		cond.LastTransitionTime = old.LastTransitionTime
		cond.LastProbeTime = old.LastProbeTime
	}
	out := make([]corev1.PodCondition, 0, len(conditions)+1)
	for _, c := range conditions {
		if c.Type != ferryv1alpha1.PodConditionOffloaded {
			out = append(out, c)
		}
	}
	return append(out, cond)
}

func offloadedCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == ferryv1alpha1.PodConditionOffloaded {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// refusedStatus fails a pod ferry will not offload, as a kubelet fails a pod
// it cannot admit: phase Failed with the reason.
func refusedStatus(local *corev1.Pod, refusal *Refusal) corev1.PodStatus {
	st := statusWithCondition(local, corev1.ConditionFalse, ReasonOffloadingRefused, refusal.Error())
	st.Phase = corev1.PodFailed
	st.Reason = ReasonOffloadingRefused
	st.Message = refusal.Error()
	return st
}

// shadowRejection is the provider's reason for not running the pod, from
// the ShadowPod's PodCreated condition, or nil.
func shadowRejection(sp *ferryv1alpha1.ShadowPod) *metav1.Condition {
	c := meta.FindStatusCondition(sp.Status.Conditions, ferryv1alpha1.ShadowPodCreated)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return c
}
