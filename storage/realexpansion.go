package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// RealVolumeExpander expands the users' claims whose data a real claim of
// the storage namespace holds (volumes bound on this cluster's real nodes):
// an expansion of the user's claim is forwarded to the real claim, whose
// class's resizer grows the volume; once the real claim's capacity holds
// it, the user's volume and claim show it (see expander).
type RealVolumeExpander struct {
	Client client.Client
	// Namespace holds the real claims.
	Namespace string
	// Recorder emits events on the users' claims; nil records none.
	Recorder events.EventRecorder
}

// Reconcile looks at one volume standing for a real claim.
func (r *RealVolumeExpander) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	namespace, name, ok := backingClaimOf(pv)
	if !ok || namespace != r.Namespace || !pv.DeletionTimestamp.IsZero() || pv.Status.Phase != corev1.VolumeBound {
		return ctrl.Result{}, nil
	}
	local, err := claimBoundTo(ctx, r.Client, pv)
	if err != nil || local == nil {
		return ctrl.Result{}, err
	}
	real := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, real); apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read claim %s/%s of volume %s: %w", namespace, name, pv.Name, err)
	}
	if !madeByStorage(real) || real.Status.Phase != corev1.ClaimBound {
		return ctrl.Result{}, nil
	}
	e := expander{client: r.Client, recorder: r.Recorder}
	if err := e.forward(ctx, r.Client, local, real, "this cluster"); err != nil {
		return ctrl.Result{}, err
	}
	capacity := real.Status.Capacity[corev1.ResourceStorage]
	if current := pv.Spec.Capacity[corev1.ResourceStorage]; !capacity.IsZero() && capacity.Cmp(current) > 0 {
		grown := pv.DeepCopy()
		grown.Spec.Capacity[corev1.ResourceStorage] = capacity
		if err := r.Client.Patch(ctx, grown, client.MergeFromWithOptions(pv, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("set capacity %s on volume %s from claim %s/%s: %w", capacity.String(), pv.Name, namespace, name, err)
		}
		log.FromContext(ctx).Info("volume grown with its real claim", "volume", pv.Name, "claim", namespace+"/"+name, "capacity", capacity.String())
	}
	// The real claim's status change (a watch) brings the next look.
	return ctrl.Result{}, e.finish(ctx, local, capacity)
}

// SetupWithManager watches the volumes standing for real claims, the users'
// claims of the virtual class whose request changes, and the real claims
// whose request or capacity changes (each real claim is named after the
// volume standing for it).
func (r *RealVolumeExpander) SetupWithManager(mgr ctrl.Manager) error {
	realVolumes := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return isRealVolume(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.PersistentVolume)
			cur, okNew := e.ObjectNew.(*corev1.PersistentVolume)
			return okOld && okNew && isRealVolume(cur) && old.Status.Phase != cur.Status.Phase && cur.Status.Phase == corev1.VolumeBound
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	sizeChanged := func(old, cur *corev1.PersistentVolumeClaim) bool {
		wasReq, isReq := old.Spec.Resources.Requests[corev1.ResourceStorage], cur.Spec.Resources.Requests[corev1.ResourceStorage]
		wasCap, isCap := old.Status.Capacity[corev1.ResourceStorage], cur.Status.Capacity[corev1.ResourceStorage]
		return wasReq.Cmp(isReq) != 0 || wasCap.Cmp(isCap) != 0
	}
	claims := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.PersistentVolumeClaim)
			cur, okNew := e.ObjectNew.(*corev1.PersistentVolumeClaim)
			return okOld && okNew && sizeChanged(old, cur)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	toVolume := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		if !ok {
			return nil
		}
		switch {
		case pvc.Namespace == r.Namespace && madeByStorage(pvc):
			// A real claim bears the name of the volume standing for it.
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pvc.Name}}}
		case pvc.Spec.VolumeName != "" && ptr.Deref(pvc.Spec.StorageClassName, "") == ferryv1alpha1.StorageClassVirtual:
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pvc.Spec.VolumeName}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("ferry-real-volume-expansion").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(realVolumes)).
		Watches(&corev1.PersistentVolumeClaim{}, toVolume, builder.WithPredicates(claims)).
		Complete(r)
}

// isRealVolume says whether o is a volume standing for a real claim.
func isRealVolume(o client.Object) bool {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok {
		return false
	}
	_, _, real := backingClaimOf(pv)
	return real
}
