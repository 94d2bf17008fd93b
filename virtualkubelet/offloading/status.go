package offloading

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons of the local pod's ferry.io/Offloaded condition.
const (
	// ReasonRunningRemotely: the provider runs the pod.
	ReasonRunningRemotely = "RunningRemotely"
	// ReasonPendingRemotely: the provider holds the pod but does not run it
	// yet (unschedulable there, pulling images, ...); the message carries
	// the provider's own reason.
	ReasonPendingRemotely = "PendingRemotely"
	// ReasonNamespaceNotOffloaded: the pod's namespace has no Ready twin
	// namespace in the provider behind the node it was bound to.
	ReasonNamespaceNotOffloaded = "NamespaceNotOffloaded"
	// ReasonOffloadingRefused: the pod can never run remotely as it is:
	// ferry does not offload it (host namespaces, host paths), or the
	// provider refuses it for good (refusedForGood: its Pod Security
	// level, an invalid field). The pod fails, as a kubelet refusing it
	// would.
	ReasonOffloadingRefused = "OffloadingRefused"
	// ReasonShadowPodRejected: the provider refused the ShadowPod for now
	// (Forbidden: an exceeded quota); ferry retries with backoff.
	ReasonShadowPodRejected = "ShadowPodRejected"
	// ReasonOffloadRetrying: the provider could not take the ShadowPod yet
	// (its API server or admission webhook unreachable, a timeout, an
	// internal error); ferry retries with backoff.
	ReasonOffloadRetrying = "OffloadRetrying"
	// ReasonProviderUnreachable: the provider does not answer the virtual
	// kubelet's health checks. It is the reason of the Ready and
	// ContainersReady conditions it turned False (nobody can tell whether
	// the pod still serves), and of the Offloaded condition of a pod not
	// running remotely.
	ReasonProviderUnreachable = "ProviderUnreachable"
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
	// PodScheduled is the consumer scheduler's: it bound the pod to the
	// virtual node. The provider's scheduling of the remote copy shows in
	// the Offloaded condition (PendingRemotely with its reason).
	st.Conditions = withLocalCondition(local, st.Conditions, corev1.PodScheduled)
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
	if st.Phase == corev1.PodPending || st.Phase == "" {
		msg := fmt.Sprintf("pending in cluster %s as %s/%s", provider, remote.Namespace, remote.Name)
		if why, _ := pendingReason(remote); why != "" {
			msg += ": " + why
		}
		st.Conditions = withOffloadedCondition(local, st.Conditions, corev1.ConditionFalse, ReasonPendingRemotely, msg)
		return st
	}
	st.Conditions = withOffloadedCondition(local, st.Conditions, corev1.ConditionTrue, ReasonRunningRemotely,
		fmt.Sprintf("running in cluster %s as %s/%s", provider, remote.Namespace, remote.Name))
	return st
}

// withLocalCondition is conditions with the one of type t replaced by the
// local pod's (dropped when the local pod has none).
func withLocalCondition(local *corev1.Pod, conditions []corev1.PodCondition, t corev1.PodConditionType) []corev1.PodCondition {
	out := slices.DeleteFunc(conditions, func(c corev1.PodCondition) bool { return c.Type == t })
	for _, c := range local.Status.Conditions {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

// pendingReason is why the provider does not run a pending pod, in the
// provider's words: its scheduler's (PodScheduled False), else the first
// waiting container's (image pull, ...), else the pod's own reason; "" when
// the provider gives none. warn says the reason is worth an event: not the
// ordinary steps of a start (ContainerCreating, PodInitializing).
func pendingReason(remote *corev1.Pod) (why string, warn bool) {
	for _, c := range remote.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && (c.Reason != "" || c.Message != "") {
			return joinReason(c.Reason, c.Message), true
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{remote.Status.InitContainerStatuses, remote.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				return joinReason(w.Reason, joinReason("container "+cs.Name, w.Message)),
					w.Reason != "ContainerCreating" && w.Reason != "PodInitializing"
			}
		}
	}
	why = joinReason(remote.Status.Reason, remote.Status.Message)
	return why, why != ""
}

func joinReason(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
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
	return offloadedConditionIn(pod.Status.Conditions)
}

func offloadedConditionIn(conditions []corev1.PodCondition) *corev1.PodCondition {
	for i := range conditions {
		if conditions[i].Type == ferryv1alpha1.PodConditionOffloaded {
			return &conditions[i]
		}
	}
	return nil
}

// unreachableStatus is the local pod's status while its provider does not
// answer: as last known (phase, container statuses, IPs), but not Ready,
// as the node lifecycle controller marks the pods of a kubelet it no longer
// hears from. Without the provider's API server nothing can see the pod's
// readiness, so the last one reported is no ground for sending it traffic.
// Ready and ContainersReady turn False with reason ProviderUnreachable; one
// already False keeps its reason, so a pod that was not ready costs no
// write. The Offloaded condition of a pod not running remotely (not
// offloaded yet, or pending there) says the same; one running remotely keeps
// its own.
func unreachableStatus(local *corev1.Pod, provider ferryv1alpha1.ClusterID) corev1.PodStatus {
	st := *local.Status.DeepCopy()
	msg := fmt.Sprintf("cluster %s does not answer the virtual kubelet's health checks: the pod's state there is unknown", provider)
	now := metav1.Now().Rfc3339Copy()
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) && c.Status != corev1.ConditionFalse {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionFalse, ReasonProviderUnreachable, msg, now
		}
	}
	if c := offloadedCondition(local); c == nil || c.Status != corev1.ConditionTrue {
		st.Conditions = withOffloadedCondition(local, st.Conditions, corev1.ConditionFalse, ReasonProviderUnreachable, msg)
	}
	return st
}

// refusedStatus fails a pod that can never run remotely as it is, as a
// kubelet fails a pod it cannot admit: phase Failed with the reason.
func refusedStatus(local *corev1.Pod, message string) corev1.PodStatus {
	st := statusWithCondition(local, corev1.ConditionFalse, ReasonOffloadingRefused, message)
	st.Phase = corev1.PodFailed
	st.Reason = ReasonOffloadingRefused
	st.Message = message
	return st
}

// refusedForGood tells whether a provider's refusal (of a ShadowPod, or of
// its real pod) is permanent: the object is invalid as it is (ferry's Pod
// Security check answers Invalid, as API validation does), so asking again
// gets the same answer. Anything else (Forbidden by an exceeded quota, an
// unreachable webhook, a timeout) may pass later and is retried.
func refusedForGood(reason metav1.StatusReason) bool {
	return reason == metav1.StatusReasonInvalid || reason == metav1.StatusReasonBadRequest
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

// ReasonResizeRefused is the event reason of a resize the provider refused.
const ReasonResizeRefused = "ResizeRefused"

// resizeRequested tells whether the local pod asks for container resources
// the remote pod does not run with (status.containerStatuses[].resources,
// which the provider's kubelet reports): a resize is not done yet.
func resizeRequested(local, remote *corev1.Pod) bool {
	if remote == nil {
		return false
	}
	running := map[string]*corev1.ResourceRequirements{}
	for i := range remote.Status.ContainerStatuses {
		running[remote.Status.ContainerStatuses[i].Name] = remote.Status.ContainerStatuses[i].Resources
	}
	for _, c := range local.Spec.Containers {
		r, ok := running[c.Name]
		if !ok || r == nil {
			continue
		}
		if !equality.Semantic.DeepEqual(c.Resources.Requests, r.Requests) || !equality.Semantic.DeepEqual(c.Resources.Limits, r.Limits) {
			return true
		}
	}
	return false
}

// resizeRefusalReason is the PodResizePending reason of a provider's
// refusal to resize: Infeasible when asking again cannot pass
// (refusedForGood, or the provider's nodes cannot resize), else Deferred
// (an exceeded quota may leave room later).
func resizeRefusalReason(reason metav1.StatusReason) string {
	if refusedForGood(reason) {
		return corev1.PodReasonInfeasible
	}
	return corev1.PodReasonDeferred
}

// withResizePending sets the PodResizePending condition, as a kubelet does
// for a resize it cannot do (yet), keeping its transition time when it
// stays.
func withResizePending(local *corev1.Pod, conditions []corev1.PodCondition, reason, message string) []corev1.PodCondition {
	cond := corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: local.Generation, LastTransitionTime: metav1.Now().Rfc3339Copy()}
	out := make([]corev1.PodCondition, 0, len(conditions)+1)
	for _, c := range conditions {
		if c.Type != corev1.PodResizePending {
			out = append(out, c)
			continue
		}
		if c.Status == corev1.ConditionTrue {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	for _, c := range local.Status.Conditions {
		if c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	return append(out, cond)
}

// shadowResizeRefusal is the provider's refusal to resize the real pod to
// the ShadowPod's current template, from its PodResizeRefused condition,
// or nil.
func shadowResizeRefusal(sp *ferryv1alpha1.ShadowPod) *metav1.Condition {
	c := meta.FindStatusCondition(sp.Status.Conditions, ferryv1alpha1.ShadowPodResizeRefused)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != sp.Generation {
		return nil
	}
	return c
}
