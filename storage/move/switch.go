package move

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

// Annotations on the volumes of a moved claim.
const (
	// AnnotationMovedClaim, on the volume standing for the copy, keeps the
	// user's claim (labels, annotations, owners, spec) while it is made
	// again: a restart between deleting and creating it loses nothing.
	AnnotationMovedClaim = "storage.ferry.io/moved-claim"
	// AnnotationReclaimPolicy keeps a volume's reclaim policy while a move
	// holds it Retain.
	AnnotationReclaimPolicy = "storage.ferry.io/reclaim-policy"

	annProvisionedBy       = "pv.kubernetes.io/provisioned-by"
	provisionerFinalizer   = "external-provisioner.volume.kubernetes.io/finalizer"
	annBindCompleted       = "pv.kubernetes.io/bind-completed"
	annBoundByController   = "pv.kubernetes.io/bound-by-controller"
	annStorageProvisioner  = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvider = "volume.beta.kubernetes.io/storage-provisioner"
)

// movedClaim is what makes the user's claim again.
type movedClaim struct {
	Labels          map[string]string                `json:"labels,omitempty"`
	Annotations     map[string]string                `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference          `json:"ownerReferences,omitempty"`
	Spec            corev1.PersistentVolumeClaimSpec `json:"spec"`
}

// ClaimBoundTo is the user's claim made again from saved, bound beforehand
// to volume pv in cluster where: the same name, labels, annotations,
// owners and request, without what binding had added.
func ClaimBoundTo(namespace, name string, saved string, pv string, where ferryv1alpha1.ClusterID) (*corev1.PersistentVolumeClaim, error) {
	var m movedClaim
	if err := json.Unmarshal([]byte(saved), &m); err != nil {
		return nil, fmt.Errorf("metadata.annotations[%s]: %w", AnnotationMovedClaim, err)
	}
	for _, k := range []string{annBindCompleted, annBoundByController, volumehelpers.AnnSelectedNode, annStorageProvisioner, annBetaStorageProvider} {
		delete(m.Annotations, k)
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[ferryv1alpha1.LabelClusterID] = string(where)
	spec := m.Spec
	spec.VolumeName = pv
	spec.StorageClassName = ptr.To(ferryv1alpha1.StorageClassVirtual)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: m.Labels, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences},
		Spec:       spec,
	}, nil
}

func saveClaim(pvc *corev1.PersistentVolumeClaim) (string, error) {
	raw, err := json.Marshal(movedClaim{Labels: pvc.Labels, Annotations: pvc.Annotations, OwnerReferences: pvc.OwnerReferences, Spec: pvc.Spec})
	return string(raw), err
}

// switching re-points the claim at the verified copy, step by step (each
// step is checked again after a restart).
func (r *Reconciler) switching(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (ctrl.Result, error) {
	dst, err := r.sideOf(ctx, mv, mv.Spec.TargetCluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	newName := targetVolumeName(mv)
	newPV := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: newName}, newPV); apierrors.IsNotFound(err) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); err != nil {
			return ctrl.Result{}, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
		}
		if string(pvc.UID) != mv.Status.ClaimUID {
			return ctrl.Result{}, r.fail(ctx, mv, ferryv1alpha1.MoveReasonClaimNotMovable, fmt.Sprintf("claim %s was made again before it was re-pointed", pvc.Name))
		}
		pv, err := r.volumeForCopy(ctx, mv, pvc, dst, newName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("create volume %s for the copy: %w", newName, err)
		}
		return ctrl.Result{Requeue: true}, nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("read volume %s: %w", newName, err)
	}
	if abandoned, err := r.abandonIfUsed(ctx, mv, newPV); abandoned || err != nil {
		return ctrl.Result{}, err
	}
	// The source stays as it is whatever happens to the claim.
	if err := r.holdVolume(ctx, mv.Status.Source.Volume); err != nil {
		return ctrl.Result{}, err
	}
	done, err := r.rebind(ctx, mv, newPV, mv.Spec.TargetCluster, mv.Status.ClaimUID)
	if err != nil || !done {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); err != nil {
		return ctrl.Result{}, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
	}
	// The copy's claim now stands for the claim made again.
	if err := r.relabel(ctx, dst, mv.Status.Target.Claim, pvc.UID); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseVolume(ctx, newPV.Name, ""); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.cleanup(ctx, mv, false); err != nil {
		return ctrl.Result{}, err
	}
	moved.Add(float64(mv.Status.Progress.BytesCopied))
	if mv.Status.StartTime != nil {
		duration.Observe(time.Since(mv.Status.StartTime.Time).Seconds())
	}
	r.event(mv, corev1.EventTypeNormal, ferryv1alpha1.MoveReasonMoved, fmt.Sprintf("claim %s now points at volume %s in cluster %s", pvc.Name, newPV.Name, mv.Spec.TargetCluster))
	if err := r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
		st.Phase = ferryv1alpha1.MoveAwaitingConfirmation
		st.Target.Volume = newPV.Name
		st.CompletionTime = ptr.To(metav1.Now())
		setReady(st, mv, metav1.ConditionTrue, ferryv1alpha1.MoveReasonMoved, fmt.Sprintf("claim %s points at the copy in cluster %s; the source volume %s is kept until spec.confirmed (or spec.revert points the claim back at it)", pvc.Name, mv.Spec.TargetCluster, mv.Status.Source.Volume))
	}); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{Requeue: true}, nil
}

// abandonIfUsed abandons the switch when a pod started using the claim
// after the copy's last look at it (a workload scaled up meanwhile): that
// pod writes to the source, so the copy is stale. Nothing of the claim has
// been touched yet; the volume made for the copy, the staged claim and the
// move's pods are removed and the source keeps its reclaim policy. Once the
// claim is being deleted no pod can start on it (the scheduler refuses
// claims being deleted), so the switch goes on.
func (r *Reconciler) abandonIfUsed(ctx context.Context, mv *ferryv1alpha1.VolumeMove, newPV *corev1.PersistentVolume) (bool, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
	}
	if string(pvc.UID) != mv.Status.ClaimUID || !pvc.DeletionTimestamp.IsZero() {
		return false, nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(mv.Namespace)); err != nil {
		return false, fmt.Errorf("list pods of %s: %w", mv.Namespace, err)
	}
	using := PodsUsing(pods.Items, pvc.Name)
	if len(using) == 0 {
		return false, nil
	}
	if err := r.releaseVolume(ctx, mv.Status.Source.Volume, ""); err != nil {
		return false, err
	}
	// The copy's volume was never bound: nothing of the library's
	// provisioner waits on it.
	if controllerutil.RemoveFinalizer(newPV, provisionerFinalizer) {
		if err := r.Client.Update(ctx, newPV); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("let volume %s go: %w", newPV.Name, err)
		}
	}
	if err := r.Client.Delete(ctx, newPV, client.Preconditions{UID: &newPV.UID}); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete volume %s made for the copy: %w", newPV.Name, err)
	}
	return true, r.fail(ctx, mv, ferryv1alpha1.MoveReasonWorkloadRunning, fmt.Sprintf("pods %s started using claim %s before it was re-pointed: the copy is stale and abandoned", strings.Join(using, ", "), pvc.Name))
}

// volumeForCopy is the volume standing for the copy, bound beforehand to
// the user's claim by name, Retain until the claim is bound to it.
func (r *Reconciler) volumeForCopy(ctx context.Context, mv *ferryv1alpha1.VolumeMove, pvc *corev1.PersistentVolumeClaim, dst side, name string) (*corev1.PersistentVolume, error) {
	class := &storagev1.StorageClass{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: ferryv1alpha1.StorageClassVirtual}, class); err != nil {
		return nil, fmt.Errorf("read storage class %s: %w", ferryv1alpha1.StorageClassVirtual, err)
	}
	target := &corev1.PersistentVolumeClaim{}
	_, claimName, _ := cutClaim(mv.Status.Target.Claim)
	if err := dst.c.Client.Get(ctx, types.NamespacedName{Namespace: dst.namespace, Name: claimName}, target); err != nil {
		return nil, fmt.Errorf("read claim %s in cluster %s: %w", mv.Status.Target.Claim, dst.cluster, err)
	}
	var pv *corev1.PersistentVolume
	if dst.local {
		backing := &corev1.PersistentVolume{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: target.Spec.VolumeName}, backing); err != nil {
			return nil, fmt.Errorf("read volume %q of claim %s: %w", target.Spec.VolumeName, mv.Status.Target.Claim, err)
		}
		pv = storage.RealVolume(name, pvc, class, target, backing)
	} else {
		pv = storage.RemoteVolume(name, pvc, class, storage.RemoteRef{Cluster: dst.cluster, Namespace: dst.namespace, Name: claimName}, ptr.Deref(target.Spec.StorageClassName, ""))
	}
	saved, err := saveClaim(pvc)
	if err != nil {
		return nil, fmt.Errorf("save claim %s: %w", pvc.Name, err)
	}
	pv.Annotations[AnnotationMovedClaim] = saved
	pv.Annotations[annProvisionedBy] = ferryv1alpha1.ProvisionerVirtual
	pv.Annotations[AnnotationReclaimPolicy] = string(pv.Spec.PersistentVolumeReclaimPolicy)
	pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	pv.Spec.StorageClassName = ferryv1alpha1.StorageClassVirtual
	pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name}
	pv.Finalizers = []string{provisionerFinalizer}
	return pv, nil
}

func cutClaim(s string) (namespace, name string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

// holdVolume makes a volume Retain, keeping its policy aside.
func (r *Reconciler) holdVolume(ctx context.Context, name string) error {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, pv); err != nil {
		return fmt.Errorf("read volume %s: %w", name, err)
	}
	if _, held := pv.Annotations[AnnotationReclaimPolicy]; held {
		return nil
	}
	patched := pv.DeepCopy()
	if patched.Annotations == nil {
		patched.Annotations = map[string]string{}
	}
	patched.Annotations[AnnotationReclaimPolicy] = string(pv.Spec.PersistentVolumeReclaimPolicy)
	patched.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(pv, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("keep volume %s (reclaim policy Retain): %w", name, err)
	}
	return nil
}

// releaseVolume gives a held volume its policy back, or policy when set.
func (r *Reconciler) releaseVolume(ctx context.Context, name string, policy corev1.PersistentVolumeReclaimPolicy) error {
	pv := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, pv); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read volume %s: %w", name, err)
	}
	kept, held := pv.Annotations[AnnotationReclaimPolicy]
	if policy == "" {
		if !held {
			return nil
		}
		policy = corev1.PersistentVolumeReclaimPolicy(kept)
	}
	if !held && pv.Spec.PersistentVolumeReclaimPolicy == policy {
		return nil
	}
	patched := pv.DeepCopy()
	delete(patched.Annotations, AnnotationReclaimPolicy)
	patched.Spec.PersistentVolumeReclaimPolicy = policy
	if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(pv, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("set reclaim policy %s on volume %s: %w", policy, name, err)
	}
	return nil
}

// rebind makes the user's claim point at pv: the claim of UID from is
// deleted and made again, bound beforehand to pv; done once it is bound.
func (r *Reconciler) rebind(ctx context.Context, mv *ferryv1alpha1.VolumeMove, pv *corev1.PersistentVolume, where ferryv1alpha1.ClusterID, from string) (bool, error) {
	key := types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, key, pvc)
	switch {
	case apierrors.IsNotFound(err):
		saved := pv.Annotations[AnnotationMovedClaim]
		if saved == "" {
			return false, fmt.Errorf("volume %s keeps no claim to make again (metadata.annotations[%s])", pv.Name, AnnotationMovedClaim)
		}
		claim, err := ClaimBoundTo(key.Namespace, key.Name, saved, pv.Name, where)
		if err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("make claim %s again, bound to volume %s: %w", key, pv.Name, err)
		}
		logger(ctx, mv).Info("claim made again, bound to the moved volume", "volume", pv.Name, "cluster", where)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read claim %s: %w", key, err)
	case string(pvc.UID) == from || (pvc.Spec.VolumeName != "" && pvc.Spec.VolumeName != pv.Name):
		if !pvc.DeletionTimestamp.IsZero() {
			return false, nil // waits for kubernetes.io/pvc-protection
		}
		if err := r.Client.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete claim %s to make it again: %w", key, err)
		}
		return false, nil
	}
	// The claim made again: the pv it names must be free for it.
	if cr := pv.Spec.ClaimRef; cr != nil && cr.UID != "" && cr.UID != pvc.UID {
		patched := pv.DeepCopy()
		patched.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: key.Namespace, Name: key.Name}
		if err := r.Client.Patch(ctx, patched, client.MergeFromWithOptions(pv, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("free volume %s for claim %s: %w", pv.Name, key, err)
		}
		return false, nil
	}
	return pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == pv.Name, nil
}

// relabel makes the claim (namespace/name) at s stand for the claim of
// UID uid.
func (r *Reconciler) relabel(ctx context.Context, s side, claim string, uid types.UID) error {
	ns, name, _ := cutClaim(claim)
	c := &corev1.PersistentVolumeClaim{}
	if err := s.c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c); err != nil {
		return fmt.Errorf("read claim %s in cluster %s: %w", claim, s.cluster, err)
	}
	if c.Labels[ferryv1alpha1.LabelOriginUID] == string(uid) {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, ferryv1alpha1.LabelOriginUID, uid))
	if err := s.c.Client.Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("label claim %s in cluster %s with %s=%s: %w", claim, s.cluster, ferryv1alpha1.LabelOriginUID, uid, err)
	}
	return nil
}

// awaiting applies a confirmation (the source is deleted) or a revert (the
// claim points at the source again, the copy is deleted).
func (r *Reconciler) awaiting(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (ctrl.Result, error) {
	switch {
	case mv.Spec.Revert:
		return r.revert(ctx, mv)
	case mv.Spec.Confirmed || mv.Spec.SourceRetention == ferryv1alpha1.RetentionDelete:
		// Deleting the source volume deletes the claim holding its data
		// (the storage fabric's Delete).
		if err := r.releaseVolume(ctx, mv.Status.Source.Volume, corev1.PersistentVolumeReclaimDelete); err != nil {
			return ctrl.Result{}, err
		}
		r.event(mv, corev1.EventTypeNormal, ferryv1alpha1.MoveReasonMoved, fmt.Sprintf("source volume %s (%s in cluster %s) deleted", mv.Status.Source.Volume, mv.Status.Source.Claim, mv.Status.Source.Cluster))
		return ctrl.Result{}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
			st.Phase = ferryv1alpha1.MoveSucceeded
			setReady(st, mv, metav1.ConditionTrue, ferryv1alpha1.MoveReasonMoved, fmt.Sprintf("claim %s points at the copy in cluster %s; the source volume %s is deleted", mv.Spec.ClaimName, mv.Spec.TargetCluster, mv.Status.Source.Volume))
		})
	}
	return ctrl.Result{}, nil
}

// revert points the claim back at the kept source volume; the copy's
// volume is then deleted.
func (r *Reconciler) revert(ctx context.Context, mv *ferryv1alpha1.VolumeMove) (ctrl.Result, error) {
	newPV := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: mv.Status.Target.Volume}, newPV); err != nil {
		return ctrl.Result{}, fmt.Errorf("read volume %s: %w", mv.Status.Target.Volume, err)
	}
	oldPV := &corev1.PersistentVolume{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: mv.Status.Source.Volume}, oldPV); err != nil {
		return ctrl.Result{}, fmt.Errorf("read the kept source volume %s: %w", mv.Status.Source.Volume, err)
	}
	if err := r.holdVolume(ctx, newPV.Name); err != nil {
		return ctrl.Result{}, err
	}
	if oldPV.Annotations[AnnotationMovedClaim] == "" {
		patched := oldPV.DeepCopy()
		patched.Annotations[AnnotationMovedClaim] = newPV.Annotations[AnnotationMovedClaim]
		if err := r.Client.Patch(ctx, patched, client.MergeFrom(oldPV)); err != nil {
			return ctrl.Result{}, fmt.Errorf("keep the claim on volume %s: %w", oldPV.Name, err)
		}
		return ctrl.Result{Requeue: true}, nil
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); err == nil && pvc.Spec.VolumeName == newPV.Name {
		var pods corev1.PodList
		if err := r.Client.List(ctx, &pods, client.InNamespace(mv.Namespace)); err != nil {
			return ctrl.Result{}, fmt.Errorf("list pods of %s: %w", mv.Namespace, err)
		}
		if using := PodsUsing(pods.Items, pvc.Name); len(using) > 0 {
			msg := fmt.Sprintf("revert waits: pods %s use claim %s; stop them first", joinNames(using), pvc.Name)
			if readyMessage(mv) != msg {
				r.event(mv, corev1.EventTypeWarning, ferryv1alpha1.MoveReasonWorkloadRunning, msg)
				return ctrl.Result{RequeueAfter: 5 * time.Second}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
					setReady(st, mv, metav1.ConditionTrue, ferryv1alpha1.MoveReasonWorkloadRunning, msg)
				})
			}
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	done, err := r.rebind(ctx, mv, oldPV, mv.Status.Source.Cluster, "")
	if err != nil || !done {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: mv.Spec.ClaimName}, pvc); err != nil {
		return ctrl.Result{}, fmt.Errorf("read claim %s/%s: %w", mv.Namespace, mv.Spec.ClaimName, err)
	}
	src, err := r.sideOf(ctx, mv, mv.Status.Source.Cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.relabel(ctx, src, mv.Status.Source.Claim, pvc.UID); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseVolume(ctx, oldPV.Name, ""); err != nil {
		return ctrl.Result{}, err
	}
	// The copy goes: its volume, released, is deleted with its claim.
	if err := r.releaseVolume(ctx, newPV.Name, corev1.PersistentVolumeReclaimDelete); err != nil {
		return ctrl.Result{}, err
	}
	r.event(mv, corev1.EventTypeNormal, ferryv1alpha1.MoveReasonReverted, fmt.Sprintf("claim %s points at volume %s in cluster %s again; the copy is deleted", pvc.Name, oldPV.Name, mv.Status.Source.Cluster))
	return ctrl.Result{}, r.setStatus(ctx, mv, func(st *ferryv1alpha1.VolumeMoveStatus) {
		st.Phase = ferryv1alpha1.MoveReverted
		setReady(st, mv, metav1.ConditionFalse, ferryv1alpha1.MoveReasonReverted, fmt.Sprintf("claim %s points at its source volume %s in cluster %s again; the copy was deleted", pvc.Name, oldPV.Name, mv.Status.Source.Cluster))
	})
}

func readyMessage(mv *ferryv1alpha1.VolumeMove) string {
	for _, c := range mv.Status.Conditions {
		if c.Type == ferryv1alpha1.VolumeMoveReady {
			return c.Message
		}
	}
	return ""
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// finalize lets a deleted VolumeMove go: a move copying is cancelled
// (what it staged is removed); one re-pointing finishes first; one
// awaiting confirmation leaves both volumes as they are (the source
// volume stays Released with policy Retain).
func (r *Reconciler) finalize(ctx context.Context, mv *ferryv1alpha1.VolumeMove) error {
	if !controllerutil.ContainsFinalizer(mv, Finalizer) {
		return nil
	}
	switch mv.Status.Phase {
	case ferryv1alpha1.MoveSwitching:
		_, err := r.switching(ctx, mv)
		return err
	case "", ferryv1alpha1.MovePending, ferryv1alpha1.MoveCopying:
		if err := r.cleanup(ctx, mv, true); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(mv.DeepCopy())
	controllerutil.RemoveFinalizer(mv, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, mv, patch))
}
