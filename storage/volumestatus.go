package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// expansionPoll is how soon a volume whose user's claim asks for more than
// its provider's claim holds is looked at again: a resizer takes seconds.
const expansionPoll = 2 * time.Second

// RemoteVolumeReconciler keeps each local volume standing for a provider's
// claim in step with it: the volume shows the provider's class, phase,
// volume and real capacity, the user's claim gets an event when the
// provider binds, and an expansion of the user's claim is forwarded to the
// provider's and reported back when done. A provider that cannot be reached
// leaves everything as it is; the next attempt converges.
type RemoteVolumeReconciler struct {
	Client    client.Client
	Providers Providers
	// Recorder emits events on the users' claims; nil records none.
	Recorder events.EventRecorder
	// PendingPoll is how soon a volume whose provider claim is not bound yet
	// is looked at again (10s when zero); SettledPoll for a bound one (2m),
	// and for every one whose provider claim Watcher watches.
	PendingPoll, SettledPoll time.Duration
	// Watcher, when set, watches the provider claims: a change of one wakes
	// its volume, which reads it from the watch's cache.
	Watcher *RemoteClaimWatcher
}

// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims/status,verbs=update;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile syncs one remote volume.
func (r *RemoteVolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pendingPoll, settledPoll := r.PendingPoll, r.SettledPoll
	if pendingPoll == 0 {
		pendingPoll = 10 * time.Second
	}
	if settledPoll == 0 {
		settledPoll = 2 * time.Minute
	}
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, req.NamespacedName, pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ref, ok := remoteRefOf(pv)
	if !ok || !pv.DeletionTimestamp.IsZero() || pv.Status.Phase == corev1.VolumeReleased {
		return ctrl.Result{}, nil
	}
	c, err := r.Providers.Client(ctx, ref.Cluster)
	if errors.Is(err, ErrNotPeered) {
		return ctrl.Result{}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	remote, cached := r.Watcher.Get(ref)
	if !cached {
		remote = &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, remote); apierrors.IsNotFound(err) {
			return r.updateVolume(ctx, pv, "Lost", "", resource.Quantity{}, settledPoll)
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("read claim %s of volume %s: %w", ref, pv.Name, err)
		}
	}
	local, err := r.localClaim(ctx, pv)
	if err != nil {
		return ctrl.Result{}, err
	}
	if local != nil {
		if err := labelClaim(ctx, r.Client, local, ref.Cluster); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.forwardExpansion(ctx, c, local, remote, ref.Cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	next := settledPoll
	if remote.Status.Phase != corev1.ClaimBound && !r.Watcher.Watching(ref) {
		next = pendingPoll
	}
	var (
		capacity resource.Quantity
		volume   string
	)
	if remote.Status.Phase == corev1.ClaimBound {
		// The volume is recorded with the binding: the provider names
		// it (spec.volumeName) a write before it binds, and recording it
		// then would cost a write of the local volume of its own.
		capacity, volume = capacityOf(remote), remote.Spec.VolumeName
	}
	if expansionInFlight(local, capacity) {
		// The provider's resizer is at work: look again soon.
		next = min(pendingPoll, expansionPoll)
	}
	previous := pv.Annotations[AnnotationRemotePhase]
	res, err := r.updateVolume(ctx, pv, string(remote.Status.Phase), volume, capacity, next)
	if err != nil {
		return res, err
	}
	if local != nil && previous != string(remote.Status.Phase) && remote.Status.Phase == corev1.ClaimBound && r.Recorder != nil {
		r.Recorder.Eventf(local, nil, corev1.EventTypeNormal, "RemoteVolumeBound", "Bind",
			"cluster %s bound claim %s/%s to volume %s of class %s, %s", ref.Cluster, ref.Namespace, ref.Name, remote.Spec.VolumeName, *remote.Spec.StorageClassName, capacity.String())
	}
	if local != nil {
		if err := r.finishExpansion(ctx, local, capacity); err != nil {
			return ctrl.Result{}, err
		}
	}
	return res, nil
}

// localClaim is the user's claim bound to pv, nil when there is none.
func (r *RemoteVolumeReconciler) localClaim(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, error) {
	return claimBoundTo(ctx, r.Client, pv)
}

// updateVolume writes what the provider says of its claim onto the local
// volume: phase and volume as annotations, capacity (when known) in the
// spec. Nothing is written when nothing changed.
func (r *RemoteVolumeReconciler) updateVolume(ctx context.Context, pv *corev1.PersistentVolume, phase, volume string, capacity resource.Quantity, next time.Duration) (ctrl.Result, error) {
	want := pv.DeepCopy()
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	if want.Spec.Capacity == nil {
		want.Spec.Capacity = corev1.ResourceList{}
	}
	want.Annotations[AnnotationRemotePhase] = phase
	if volume != "" {
		want.Annotations[AnnotationRemoteVolume] = volume
	}
	if !capacity.IsZero() {
		want.Spec.Capacity[corev1.ResourceStorage] = capacity
	}
	current := pv.Spec.Capacity[corev1.ResourceStorage]
	if pv.Annotations[AnnotationRemotePhase] == phase && (volume == "" || pv.Annotations[AnnotationRemoteVolume] == volume) &&
		(capacity.IsZero() || current.Cmp(capacity) == 0) {
		return ctrl.Result{RequeueAfter: next}, nil
	}
	if err := r.Client.Patch(ctx, want, client.MergeFromWithOptions(pv, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, fmt.Errorf("update volume %s from its provider's claim: %w", pv.Name, err)
	}
	log.FromContext(ctx).V(1).Info("remote volume updated", "volume", pv.Name, "phase", phase, "capacity", capacity.String())
	return ctrl.Result{RequeueAfter: next}, nil
}

// forwardExpansion raises the provider's claim's request to the user's
// (expander.forward).
func (r *RemoteVolumeReconciler) forwardExpansion(ctx context.Context, c client.Client, local, remote *corev1.PersistentVolumeClaim, cluster ferryv1alpha1.ClusterID) error {
	return expander{client: r.Client, recorder: r.Recorder}.forward(ctx, c, local, remote, "provider "+string(cluster))
}

// finishExpansion reports a finished expansion on the user's claim, as an
// external resizer does: once the provider's volume holds the requested
// size, the claim's capacity shows it and its resize status and conditions
// go (expander.finish).
func (r *RemoteVolumeReconciler) finishExpansion(ctx context.Context, local *corev1.PersistentVolumeClaim, capacity resource.Quantity) error {
	return expander{client: r.Client, recorder: r.Recorder}.finish(ctx, local, capacity)
}

// SetupWithManager watches the volumes of ferry's remote CSI driver and
// the claims of the virtual class bound to a volume.
func (r *RemoteVolumeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A remote volume is looked at when it appears (a restart lists them
	// all) and when it is first bound; then it polls its provider. Updates
	// of its own (its annotations, the library's finalizer) cost no
	// provider request.
	remoteVolumes := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return isRemoteVolume(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.PersistentVolume)
			cur, okNew := e.ObjectNew.(*corev1.PersistentVolume)
			return okOld && okNew && isRemoteVolume(cur) && old.Status.Phase != cur.Status.Phase && cur.Status.Phase == corev1.VolumeBound
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	// A user's claim asking for more (an expansion) is a change of its
	// volume; its other updates (status, annotations) are not.
	expanded := predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*corev1.PersistentVolumeClaim)
			cur, okNew := e.ObjectNew.(*corev1.PersistentVolumeClaim)
			if !okOld || !okNew {
				return false
			}
			was, is := old.Spec.Resources.Requests[corev1.ResourceStorage], cur.Spec.Resources.Requests[corev1.ResourceStorage]
			return is.Cmp(was) != 0
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	claimsVolume := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		pvc, ok := o.(*corev1.PersistentVolumeClaim)
		if !ok || pvc.Spec.VolumeName == "" || ptr.Deref(pvc.Spec.StorageClassName, "") != ferryv1alpha1.StorageClassVirtual {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: pvc.Spec.VolumeName}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ferry-remote-volumes").
		For(&corev1.PersistentVolume{}, builder.WithPredicates(remoteVolumes)).
		Watches(&corev1.PersistentVolumeClaim{}, claimsVolume, builder.WithPredicates(expanded)).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	if r.Watcher != nil {
		// A provider claim's change wakes its volume.
		b = b.WatchesRawSource(source.Channel(r.Watcher.Wake(), &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// isRemoteVolume says whether o is a volume standing for a provider's claim.
func isRemoteVolume(o client.Object) bool {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok {
		return false
	}
	_, remote := remoteRefOf(pv)
	return remote
}
