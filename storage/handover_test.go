package storage

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// A claim of the virtual class is handed to ferry's provisioner once its
// node is picked, and only then; claims of other classes are not ferry's.
func TestClaimHandoverHandsOnlyPickedClaimsOfTheVirtualClass(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	picked := claim("1Gi")
	picked.Annotations[volumehelpers.AnnSelectedNode] = "ferry-eu"
	waiting := claim("1Gi")
	waiting.Name = "data-web-1"
	other := claim("1Gi")
	other.Name = "data-web-2"
	other.Annotations[volumehelpers.AnnSelectedNode] = "worker-1"
	other.Spec.StorageClassName = new("standard")
	bound := claim("1Gi")
	bound.Name = "data-web-3"
	bound.Annotations[volumehelpers.AnnSelectedNode] = "ferry-eu"
	bound.Spec.VolumeName = "pvc-3"
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(picked, waiting, other, bound).Build()
	h := &ClaimHandover{Client: c}
	ctx := context.Background()
	for name, want := range map[string]bool{picked.Name: true, waiting.Name: false, other.Name: false, bound.Name: false} {
		key := client.ObjectKey{Namespace: "shop", Name: name}
		if _, err := h.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		got := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		handed := got.Annotations[volumehelpers.AnnStorageProvisioner] == ferryv1alpha1.ProvisionerVirtual &&
			got.Annotations[volumehelpers.AnnBetaStorageProvisioner] == ferryv1alpha1.ProvisionerVirtual
		_, any := got.Annotations[volumehelpers.AnnStorageProvisioner]
		if handed != want || (!want && any) {
			t.Errorf("claim %s: annotations %v; handed to ferry's provisioner: %v, want %v", name, got.Annotations, handed, want)
		}
	}
}
