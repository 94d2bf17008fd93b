package storage

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// provisionRemote serves a claim whose first pod goes to a virtual node:
// the provider behind it is asked for a claim, of the provider class that
// serves the requested one, in the namespace's twin there, and the user's
// claim gets a local volume standing for it. The provider's own binding
// mode applies to its claim (it may bind only when the offloaded pod is
// scheduled there).
func (p *Provisioner) provisionRemote(ctx context.Context, o controller.ProvisionOptions, node *corev1.Node) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	pvc := o.PVC
	cluster := placement.NodeCluster(node)
	fail := func(state controller.ProvisioningState, err error) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
		return nil, state, fmt.Errorf("claim %s/%s in cluster %s: %w", pvc.Namespace, pvc.Name, cluster, err)
	}
	classes, _, err := placement.NodeStorageClasses(node)
	if err != nil {
		return fail(controller.ProvisioningReschedule, because(ReasonClassNotOffered, err))
	}
	providerClass, err := placement.ResolveStorageClass(classes, requestedClass(pvc))
	if err != nil {
		return fail(controller.ProvisioningReschedule, because(ReasonClassNotOffered, fmt.Errorf("the provider %w", err)))
	}
	twin, state, err := p.twinNamespace(ctx, pvc.Namespace, cluster)
	if err != nil {
		return fail(state, err)
	}
	c, err := p.opts.Providers.Client(ctx, cluster)
	if errors.Is(err, ErrNotPeered) {
		return fail(controller.ProvisioningReschedule, err)
	} else if err != nil {
		return fail(controller.ProvisioningNoChange, err)
	}
	ref := remoteRef{Cluster: cluster, Namespace: twin, Name: pvc.Name}
	remote := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: twin, Name: pvc.Name, Labels: originLabels(p.opts.ClusterID, pvc)},
		Spec:       claimSpecFor(pvc, providerClass),
	}
	err = c.Create(ctx, remote)
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(remote), existing); err != nil {
			return fail(controller.ProvisioningNoChange, fmt.Errorf("read claim %s/%s: %w", twin, pvc.Name, err))
		}
		if !standsFor(existing, pvc.UID) {
			return fail(controller.ProvisioningReschedule, because(ReasonConflict, fmt.Errorf("claim %s/%s exists there and was not made by ferry for this claim: ferry leaves it alone", twin, pvc.Name)))
		}
		providerClass = *existing.Spec.StorageClassName
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// Quota, admission or a class the provider refuses: no claim was
		// made, another cluster may serve it.
		return fail(controller.ProvisioningReschedule, fmt.Errorf("the provider refused claim %s/%s: %w", twin, pvc.Name, err))
	default:
		return fail(controller.ProvisioningInBackground, fmt.Errorf("create claim %s/%s: %w", twin, pvc.Name, err))
	}
	pv := remoteVolume(o.PVName, pvc, o.StorageClass, ref, providerClass)
	p.event(ctx, pvc, "DataLocation", "data lives in cluster %s: claim %s/%s of class %s there", cluster, twin, pvc.Name, providerClass)
	return pv, controller.ProvisioningFinished, nil
}

// twinNamespace is the namespace's twin in cluster, from its
// NamespaceOffloading. A namespace not offloaded there cannot use it
// (the claim goes back to the scheduler); a twin not Ready yet is waited
// for.
func (p *Provisioner) twinNamespace(ctx context.Context, namespace string, cluster ferryv1alpha1.ClusterID) (string, controller.ProvisioningState, error) {
	var nso ferryv1alpha1.NamespaceOffloading
	err := p.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)
	if apierrors.IsNotFound(err) {
		return "", controller.ProvisioningReschedule, because(ReasonNotOffloaded, fmt.Errorf("namespace %s is not offloaded", namespace))
	} else if err != nil {
		return "", controller.ProvisioningNoChange, fmt.Errorf("read NamespaceOffloading of %s: %w", namespace, err)
	}
	for _, c := range nso.Status.Clusters {
		if c.ClusterID != cluster {
			continue
		}
		if c.Phase != ferryv1alpha1.OffloadingReady || c.TwinNamespace == "" {
			return "", controller.ProvisioningNoChange, because(ReasonTwinNotReady, fmt.Errorf("the twin of namespace %s is %s, not Ready yet", namespace, c.Phase))
		}
		return c.TwinNamespace, controller.ProvisioningFinished, nil
	}
	return "", controller.ProvisioningReschedule, because(ReasonNotOffloaded, fmt.Errorf("namespace %s is not offloaded to it", namespace))
}

// deleteRemote deletes the provider's claim holding a volume's data. A
// provider no longer peered removes the tenant's twin namespaces, claims
// included, itself.
func (p *Provisioner) deleteRemote(ctx context.Context, pv *corev1.PersistentVolume, ref remoteRef) error {
	logger := log.FromContext(ctx).WithValues("volume", pv.Name, "remoteClaim", ref.String())
	c, err := p.opts.Providers.Client(ctx, ref.Cluster)
	if errors.Is(err, ErrNotPeered) {
		logger.Info("provider no longer peered: it removes the claim with the consumer's twin namespaces")
		return nil
	} else if err != nil {
		return fmt.Errorf("delete claim %s of volume %s: %w", ref, pv.Name, err)
	}
	remote := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, remote); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read claim %s of volume %s: %w", ref, pv.Name, err)
	}
	if cr := pv.Spec.ClaimRef; !madeByStorage(remote) || (cr != nil && !standsFor(remote, cr.UID)) {
		logger.Info("provider's claim does not stand for this volume's claim: left alone")
		return nil
	}
	if err := c.Delete(ctx, remote, client.Preconditions{UID: &remote.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete claim %s of volume %s: %w", ref, pv.Name, err)
	}
	logger.Info("deleted the provider's claim of a released volume")
	return nil
}
