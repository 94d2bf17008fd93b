package storage

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ClaimHandover hands a claim of the virtual class to ferry's provisioner
// as soon as the scheduler has picked its first pod's node, as
// kube-controller-manager's volume controller does (the annotations
// volume.kubernetes.io/storage-provisioner and its beta twin, which the
// provisioning library waits for) but without waiting behind that
// controller's single queue of every claim and volume of the cluster: in a
// burst of claims, that wait was the longest step of an offloaded claim
// (bench-storage). kube-controller-manager finds the annotations set and
// leaves them.
type ClaimHandover struct {
	Client client.Client
}

// needsHandover says whether pvc is a claim of the virtual class whose
// node is picked and that is not handed to a provisioner yet.
func needsHandover(o client.Object) bool {
	pvc, ok := o.(*corev1.PersistentVolumeClaim)
	if !ok || ptr.Deref(pvc.Spec.StorageClassName, "") != ferryv1alpha1.StorageClassVirtual || pvc.Spec.VolumeName != "" || !pvc.DeletionTimestamp.IsZero() {
		return false
	}
	_, handed := pvc.Annotations[volumehelpers.AnnStorageProvisioner]
	return !handed && pvc.Annotations[volumehelpers.AnnSelectedNode] != ""
}

// Reconcile hands one claim over.
func (h *ClaimHandover) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.Client.Get(ctx, req.NamespacedName, pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !needsHandover(pvc) {
		return ctrl.Result{}, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		volumehelpers.AnnStorageProvisioner:     ferryv1alpha1.ProvisionerVirtual,
		volumehelpers.AnnBetaStorageProvisioner: ferryv1alpha1.ProvisionerVirtual,
	}}})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := h.Client.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("hand claim %s/%s to provisioner %s: %w", pvc.Namespace, pvc.Name, ferryv1alpha1.ProvisionerVirtual, err))
	}
	return ctrl.Result{}, nil
}

// SetupWithManager watches the claims of the virtual class.
func (h *ClaimHandover) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("ferry-claim-handover").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(needsHandover))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(h)
}
