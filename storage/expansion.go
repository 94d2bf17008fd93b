package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Expansion of a user's claim of the virtual class is done by the claim
// holding its data (the backing claim: a provider's claim, or a real claim
// in the storage namespace), whose own resizer grows the volume. ferry acts
// for the user's claim as a CSI external-resizer acts for its driver's:
// it raises the backing claim's request, marks the user's claim resizing
// (allocatedResources, ControllerResizeInProgress, condition Resizing), and
// once the backing claim's capacity holds the request, shows it on the
// user's volume and claim and drops the resize status and conditions. The
// volume the pod mounts is the backing one, so there is nothing for a node
// to do. A backing class that does not expand (the API server refuses the
// request) gets an ExpansionRefused event and changes nothing.

// Event reasons on a user's claim about its expansion.
const (
	EventExpansionForwarded = "ExpansionForwarded"
	EventExpansionRefused   = "ExpansionRefused"
	EventExpansionDone      = "VolumeResizeSuccessful"
)

// resizeConditions are the claim conditions a resize sets; none stays once
// it is done.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// expansionToForward is the request to set on the backing claim: the user's
// when it asks for more than the backing claim does.
func expansionToForward(local, backing *corev1.PersistentVolumeClaim) (want, have resource.Quantity, ok bool) {
	want = local.Spec.Resources.Requests[corev1.ResourceStorage]
	have = backing.Spec.Resources.Requests[corev1.ResourceStorage]
	return want, have, want.Cmp(have) > 0
}

// withoutResizeConditions is conditions without the resize ones, plus add.
func withoutResizeConditions(conditions []corev1.PersistentVolumeClaimCondition, add ...corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range conditions {
		if !resizeConditions[c.Type] {
			out = append(out, c)
		}
	}
	return append(out, add...)
}

// markResizing is the user's claim while its backing claim grows to want.
func markResizing(local *corev1.PersistentVolumeClaim, want resource.Quantity, now metav1.Time) *corev1.PersistentVolumeClaim {
	out := local.DeepCopy()
	out.Status.Conditions = withoutResizeConditions(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: now,
	})
	if out.Status.AllocatedResourceStatuses == nil {
		out.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	out.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = corev1.PersistentVolumeClaimControllerResizeInProgress
	if out.Status.AllocatedResources == nil {
		out.Status.AllocatedResources = corev1.ResourceList{}
	}
	out.Status.AllocatedResources[corev1.ResourceStorage] = want
	return out
}

// resizeDone says whether the user's claim should show capacity, the
// backing claim's (zero when unknown): it is more than the claim shows, or
// the claim is marked resizing and capacity holds its request.
func resizeDone(local *corev1.PersistentVolumeClaim, capacity resource.Quantity) bool {
	if capacity.IsZero() || local.Status.Phase != corev1.ClaimBound {
		return false
	}
	have := local.Status.Capacity[corev1.ResourceStorage]
	if capacity.Cmp(have) > 0 {
		return true
	}
	_, marked := local.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
	want := local.Spec.Resources.Requests[corev1.ResourceStorage]
	return marked && capacity.Cmp(want) >= 0
}

// markResized is the user's claim once its data holds capacity: the
// capacity shown, no resize status or condition.
func markResized(local *corev1.PersistentVolumeClaim, capacity resource.Quantity) *corev1.PersistentVolumeClaim {
	out := local.DeepCopy()
	if out.Status.Capacity == nil {
		out.Status.Capacity = corev1.ResourceList{}
	}
	if have := out.Status.Capacity[corev1.ResourceStorage]; capacity.Cmp(have) > 0 {
		out.Status.Capacity[corev1.ResourceStorage] = capacity
	}
	if allocated, ok := out.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(capacity) < 0 {
		out.Status.AllocatedResources[corev1.ResourceStorage] = capacity
	}
	delete(out.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
	if len(out.Status.AllocatedResourceStatuses) == 0 {
		out.Status.AllocatedResourceStatuses = nil
	}
	out.Status.Conditions = withoutResizeConditions(out.Status.Conditions)
	return out
}

// expander forwards expansions of users' claims and reports them done.
type expander struct {
	client   client.Client // this cluster
	recorder events.EventRecorder
}

// forward raises the backing claim's request (through c, the client of the
// cluster holding it; where names the claim for events) to the user's, and
// marks the user's claim resizing. A refusal by the backing cluster's API
// server (its class does not expand, a quota) is an ExpansionRefused event
// on the user's claim, nothing else: it is tried again at the next look.
func (e expander) forward(ctx context.Context, c client.Client, local, backing *corev1.PersistentVolumeClaim, where string) error {
	want, have, ok := expansionToForward(local, backing)
	if !ok {
		return nil
	}
	patched := backing.DeepCopy()
	if patched.Spec.Resources.Requests == nil {
		patched.Spec.Resources.Requests = corev1.ResourceList{}
	}
	patched.Spec.Resources.Requests[corev1.ResourceStorage] = want
	err := c.Patch(ctx, patched, client.MergeFrom(backing))
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		if e.recorder != nil {
			e.recorder.Eventf(local, nil, corev1.EventTypeWarning, EventExpansionRefused, "Resize", "%s refused to expand claim %s/%s to %s: %v", where, backing.Namespace, backing.Name, want.String(), err)
		}
		return nil
	} else if err != nil {
		return fmt.Errorf("expand claim %s/%s in %s to %s: %w", backing.Namespace, backing.Name, where, want.String(), err)
	}
	if e.recorder != nil {
		e.recorder.Eventf(local, nil, corev1.EventTypeNormal, EventExpansionForwarded, "Resize", "asked %s to expand claim %s/%s from %s to %s", where, backing.Namespace, backing.Name, have.String(), want.String())
	}
	// Optimistic lock: a merge patch computed from a stale cached claim
	// would leave conditions it never saw (a Resizing that stays forever).
	if err := e.client.Status().Patch(ctx, markResizing(local, want, metav1.Now()), client.MergeFromWithOptions(local, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("mark claim %s/%s resizing to %s: %w", local.Namespace, local.Name, want.String(), err)
	}
	return nil
}

// finish shows capacity, the backing claim's (zero when unknown), on the
// user's claim once the expansion is done (resizeDone).
func (e expander) finish(ctx context.Context, local *corev1.PersistentVolumeClaim, capacity resource.Quantity) error {
	if !resizeDone(local, capacity) {
		return nil
	}
	_, marked := local.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
	// Optimistic lock: from a stale cached claim (without the Resizing
	// condition the API server has), the patch would not remove it, and the
	// claim would keep it forever; a conflict retries with a fresh one.
	if err := e.client.Status().Patch(ctx, markResized(local, capacity), client.MergeFromWithOptions(local, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("report capacity %s on claim %s/%s: %w", capacity.String(), local.Namespace, local.Name, err)
	}
	if marked && e.recorder != nil {
		e.recorder.Eventf(local, nil, corev1.EventTypeNormal, EventExpansionDone, "Resize", "the volume holding the claim's data has grown to %s", capacity.String())
	}
	return nil
}

// expansionInFlight says whether the user's claim asks for more than
// capacity, what its data holds: its holder is looked at again soon.
func expansionInFlight(local *corev1.PersistentVolumeClaim, capacity resource.Quantity) bool {
	if local == nil {
		return false
	}
	want := local.Spec.Resources.Requests[corev1.ResourceStorage]
	return want.Cmp(capacity) > 0
}

// claimBoundTo is the user's claim bound to pv, nil when there is none.
func claimBoundTo(ctx context.Context, c client.Client, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	cr := pv.Spec.ClaimRef
	if cr == nil {
		return nil, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cr.Namespace, Name: cr.Name}, pvc); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read claim %s/%s of volume %s: %w", cr.Namespace, cr.Name, pv.Name, err)
	}
	if pvc.UID != cr.UID || pvc.Spec.VolumeName != pv.Name {
		return nil, nil
	}
	return pvc, nil
}
