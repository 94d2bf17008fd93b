package storage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// provisionReal serves a claim whose first pod goes to one of this
// cluster's real nodes: a claim of the requested real class, pinned to the
// node, is made in the storage namespace; once its volume exists, the user's
// claim gets a volume with the same source and node affinity.
func (p *Provisioner) provisionReal(ctx context.Context, o controller.ProvisionOptions, node *corev1.Node) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	pvc := o.PVC
	class, err := p.realClass(ctx, requestedClass(pvc))
	if err != nil {
		return nil, controller.ProvisioningReschedule, because(ReasonClassNotOffered, fmt.Errorf("claim %s/%s on node %s: %w", pvc.Namespace, pvc.Name, node.Name, err))
	}
	key := types.NamespacedName{Namespace: p.opts.Namespace, Name: o.PVName}
	real := &corev1.PersistentVolumeClaim{}
	err = p.client.Get(ctx, key, real)
	switch {
	case apierrors.IsNotFound(err):
		real = &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: key.Namespace, Name: key.Name,
				Labels:      originLabels(p.opts.ClusterID, pvc),
				Annotations: map[string]string{volumehelpers.AnnSelectedNode: node.Name},
			},
			Spec: claimSpecFor(pvc, class.Name),
		}
		if err := p.client.Create(ctx, real); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, controller.ProvisioningNoChange, fmt.Errorf("create claim %s of class %s for %s/%s: %w", key, class.Name, pvc.Namespace, pvc.Name, err)
		}
		p.event(ctx, pvc, "ProvisioningRealClaim", "asked for claim %s of class %s on node %s", key, class.Name, node.Name)
	case err != nil:
		return nil, controller.ProvisioningNoChange, fmt.Errorf("read claim %s: %w", key, err)
	case !standsFor(real, pvc.UID):
		return nil, controller.ProvisioningFinished, because(ReasonConflict, fmt.Errorf("claim %s exists and does not stand for %s/%s: ferry leaves it alone", key, pvc.Namespace, pvc.Name))
	}
	backing, state, err := p.waitForRealVolume(ctx, key, class.Name, node.Name)
	if err != nil {
		return nil, state, err
	}
	pv := realVolume(o.PVName, pvc, o.StorageClass, real, backing)
	p.event(ctx, pvc, "DataLocation", "data lives in this cluster: volume %s of class %s (claim %s), on node %s", backing.Name, class.Name, key, node.Name)
	return pv, controller.ProvisioningFinished, nil
}

// realClass is the StorageClass a claim asking for requested is served
// with in this cluster: that class, or for "" the default one.
func (p *Provisioner) realClass(ctx context.Context, requested string) (*storagev1.StorageClass, error) {
	if requested == "" {
		var classes storagev1.StorageClassList
		if err := p.client.List(ctx, &classes); err != nil {
			return nil, fmt.Errorf("list storage classes: %w", err)
		}
		found := placement.DefaultStorageClass(classes.Items)
		if found == nil {
			return nil, fmt.Errorf("this cluster has no default storage class (%s: \"\" asks for it)", ferryv1alpha1.AnnotationRequestedStorageClass)
		}
		return found, nil
	}
	class := &storagev1.StorageClass{}
	if err := p.client.Get(ctx, types.NamespacedName{Name: requested}, class); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("metadata.annotations[%s]: storage class %q does not exist in this cluster", ferryv1alpha1.AnnotationRequestedStorageClass, requested)
	} else if err != nil {
		return nil, fmt.Errorf("read storage class %s: %w", requested, err)
	}
	if class.Provisioner == ferryv1alpha1.ProvisionerVirtual {
		return nil, fmt.Errorf("metadata.annotations[%s]: storage class %q is ferry's virtual class itself", ferryv1alpha1.AnnotationRequestedStorageClass, requested)
	}
	return class, nil
}

// waitForRealVolume waits, up to BindWait, for the real claim's volume. A
// real provisioner that hands the claim back (it dropped the selected node)
// cannot provision on that node: the real claim is deleted and the user's
// claim handed back to the scheduler too.
func (p *Provisioner) waitForRealVolume(ctx context.Context, key types.NamespacedName, class, node string) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	var (
		real    corev1.PersistentVolumeClaim
		refused bool
	)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, p.opts.BindWait, true, func(ctx context.Context) (bool, error) {
		if err := p.client.Get(ctx, key, &real); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		refused = real.Spec.VolumeName == "" && real.Annotations[volumehelpers.AnnSelectedNode] == ""
		return real.Spec.VolumeName != "" || refused, nil
	})
	if refused {
		if err := p.client.Delete(ctx, &real, client.Preconditions{UID: &real.UID}); client.IgnoreNotFound(err) != nil {
			return nil, controller.ProvisioningNoChange, fmt.Errorf("delete claim %s, refused by the provisioner of class %s: %w", key, class, err)
		}
		return nil, controller.ProvisioningReschedule, because(ReasonProvisionerRefused, fmt.Errorf("the provisioner of class %s cannot provision on node %s (see the events of claim %s)", class, node, key))
	}
	if err != nil {
		return nil, controller.ProvisioningInBackground, because(reasonWaiting, fmt.Errorf("waiting for claim %s of class %s on node %s to be bound", key, class, node))
	}
	pv := &corev1.PersistentVolume{}
	if err := p.client.Get(ctx, types.NamespacedName{Name: real.Spec.VolumeName}, pv); err != nil {
		return nil, controller.ProvisioningInBackground, fmt.Errorf("read volume %s of claim %s: %w", real.Spec.VolumeName, key, err)
	}
	return pv, controller.ProvisioningFinished, nil
}

// deleteReal deletes the real claim holding a volume's data; its own volume
// then follows its class's reclaim policy.
func (p *Provisioner) deleteReal(ctx context.Context, pv *corev1.PersistentVolume, namespace, name string) error {
	real := &corev1.PersistentVolumeClaim{}
	if err := p.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, real); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read claim %s/%s of volume %s: %w", namespace, name, pv.Name, err)
	}
	if !madeByStorage(real) {
		log.FromContext(ctx).Info("claim named by the volume was not made by ferry: left alone", "volume", pv.Name, "claim", namespace+"/"+name)
		return nil
	}
	if err := p.client.Delete(ctx, real, client.Preconditions{UID: &real.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete claim %s/%s of volume %s: %w", namespace, name, pv.Name, err)
	}
	log.FromContext(ctx).Info("deleted the real claim of a released volume", "volume", pv.Name, "claim", namespace+"/"+name)
	return nil
}
