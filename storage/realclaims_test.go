package storage

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Only a real claim nothing will use goes: its user claim is gone (or is
// another claim of the same name) and no volume stands for it.
func TestRealClaimCollectorDeletesOnlyWhatNothingWillUse(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-time.Hour))
	user := claim("1Gi") // shop/data-web-0, uid-1
	real := func(name string, origin *corev1.PersistentVolumeClaim, created metav1.Time) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: name,
			CreationTimestamp: created, Labels: originLabels("home", origin)}}
	}
	gone := claim("1Gi")
	gone.Name, gone.UID = "deleted", "uid-gone"
	successor := claim("1Gi")
	successor.UID = "uid-predecessor" // the user's claim was recreated under its name
	objs := []runtime.Object{
		user,
		real("pvc-with-volume", gone, old), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-with-volume"}},
		real("pvc-provisioning", user, old),
		real("pvc-orphan", gone, old),
		real("pvc-of-predecessor", successor, old),
		real("pvc-young", gone, metav1.Now()),
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithRuntimeObjects(objs...).Build()
	r := &RealClaimCollector{Client: c, Namespace: DefaultNamespace}
	for name, kept := range map[string]bool{
		"pvc-with-volume": true, "pvc-provisioning": true, "pvc-young": true,
		"pvc-orphan": false, "pvc-of-predecessor": false,
	} {
		key := types.NamespacedName{Namespace: DefaultNamespace, Name: name}
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		err := c.Get(context.Background(), key, &corev1.PersistentVolumeClaim{})
		if kept && err != nil {
			t.Errorf("%s deleted (%v), want it kept", name, err)
		}
		if !kept && !apierrors.IsNotFound(err) {
			t.Errorf("%s kept (%v), want it deleted", name, err)
		}
	}
}
