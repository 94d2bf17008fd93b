package hostpath

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// ErrInfeasible marks an expansion the class can never grant as asked (its
// node has no room for it): as a CSI driver's OutOfRange, the resizer
// reports it on the claim (ControllerResizeInfeasible) and does not retry
// until the claim's request changes.
var ErrInfeasible = errors.New("infeasible")

// Owns says whether pv is a volume this provisioner made: a hostPath
// directory <root>/<volume name>.
func (p *Provisioner) Owns(pv *corev1.PersistentVolume) bool {
	return pv.Spec.HostPath != nil && pv.Spec.HostPath.Path == filepath.Join(p.root, pv.Name)
}

// Expand grows pv, of class, to size, as a CSI driver's
// ControllerExpandVolume does: a directory has no size of its own, so what
// grows is what the volume takes of its class on its node, which must have
// room for it (else an error wrapping ErrInfeasible). It returns the
// volume's new capacity. A hostPath directory needs no file system resize
// on the node.
func (p *Provisioner) Expand(ctx context.Context, pv *corev1.PersistentVolume, class *storagev1.StorageClass, size resource.Quantity) (resource.Quantity, error) {
	if !p.Owns(pv) {
		return resource.Quantity{}, fmt.Errorf("volume %s is not a directory %s made", pv.Name, p.root)
	}
	limit, err := capacityLimit(class)
	if err != nil {
		return resource.Quantity{}, err
	}
	node := PinnedNode(pv)

	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.allocated[pv.Name]
	if !ok {
		// Made before this process started: it takes what it says.
		a = allocation{class: class.Name, node: node, size: pv.Spec.Capacity[corev1.ResourceStorage]}
	}
	if size.Cmp(a.size) <= 0 {
		p.allocated[pv.Name] = a
		return a.size, nil
	}
	if limit != nil && node != "" {
		used := p.usedLocked(class.Name, node, pv.Name)
		if free := freeOf(*limit, used); free.Cmp(size) < 0 {
			return resource.Quantity{}, fmt.Errorf("%w: node %s is out of class %s: %s of its %s capacity free for volume %s, which asks for %s",
				ErrInfeasible, node, class.Name, free.String(), limit.String(), pv.Name, size.String())
		}
	}
	a.size = size
	p.allocated[pv.Name] = a
	klog.FromContext(ctx).Info("Expanded volume", "volume", pv.Name, "node", node, "size", size.String())
	return size, nil
}

// resizeConditions are the claim conditions a resize sets; a finished
// resize leaves none of them.
var resizeConditions = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// NeedsResize says whether the claim asks for more than its capacity, or
// carries a resize status to settle, and the size to grow it to (its
// request, or its capacity when the user lowered the request back to it
// after an infeasible expansion, the recovery the API allows).
func NeedsResize(pvc *corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return resource.Quantity{}, false
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	have := pvc.Status.Capacity[corev1.ResourceStorage]
	if want.Cmp(have) > 0 {
		return want, true
	}
	if _, ok := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		return have, true
	}
	return resource.Quantity{}, false
}

// withResizeConditions is conditions without any resize condition, plus add.
func withResizeConditions(conditions []corev1.PersistentVolumeClaimCondition, add ...corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	for _, c := range conditions {
		if !resizeConditions[c.Type] {
			out = append(out, c)
		}
	}
	return append(out, add...)
}

// setStorageStatus sets (or, with "", removes) the claim's resize status
// of storage.
func setStorageStatus(pvc *corev1.PersistentVolumeClaim, status corev1.ClaimResourceStatus) {
	if status == "" {
		delete(pvc.Status.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(pvc.Status.AllocatedResourceStatuses) == 0 {
			pvc.Status.AllocatedResourceStatuses = nil
		}
		return
	}
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] = status
}

// ResizeInProgress is the claim marked as an external resizer marks it
// before expanding its volume to size: allocatedResources is size, the
// storage resize status ControllerResizeInProgress, condition Resizing.
func ResizeInProgress(pvc *corev1.PersistentVolumeClaim, size resource.Quantity, now metav1.Time) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	out.Status.Conditions = withResizeConditions(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: now,
	})
	setStorageStatus(out, corev1.PersistentVolumeClaimControllerResizeInProgress)
	if out.Status.AllocatedResources == nil {
		out.Status.AllocatedResources = corev1.ResourceList{}
	}
	out.Status.AllocatedResources[corev1.ResourceStorage] = size
	return out
}

// ResizeFinished is the claim once its volume holds size and needs no
// file system resize on the node: capacity size, no storage resize status,
// no resize condition (allocatedResources keeps what was asked).
func ResizeFinished(pvc *corev1.PersistentVolumeClaim, size resource.Quantity) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	if out.Status.Capacity == nil {
		out.Status.Capacity = corev1.ResourceList{}
	}
	out.Status.Capacity[corev1.ResourceStorage] = size
	out.Status.Conditions = withResizeConditions(out.Status.Conditions)
	setStorageStatus(out, "")
	return out
}

// ResizeInfeasible is the claim after an expansion that can never be
// granted as asked: storage resize status ControllerResizeInfeasible and
// condition ControllerResizeError with the reason, capacity unchanged.
// Lowering the request back to the capacity settles it.
func ResizeInfeasible(pvc *corev1.PersistentVolumeClaim, reason string, now metav1.Time) *corev1.PersistentVolumeClaim {
	out := pvc.DeepCopy()
	out.Status.Conditions = withResizeConditions(out.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, LastTransitionTime: now,
		Reason: "ResizeInfeasible", Message: reason,
	})
	setStorageStatus(out, corev1.PersistentVolumeClaimControllerResizeInfeasible)
	return out
}
