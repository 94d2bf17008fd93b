package move

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

type fakeProvider struct{ c client.Client }

func (f fakeProvider) Provider(context.Context, ferryv1alpha1.ClusterID) (*Cluster, error) {
	return &Cluster{Client: f.c}, nil
}

// A pod that starts using the claim between the copy's last look and the
// switch writes to the source: the switch is abandoned before the claim is
// touched, the copy's volume and staged claim go, the source gets its
// reclaim policy back.
func TestSwitchAbandonedWhenAPodStartedUsingTheClaim(t *testing.T) {
	pod := podWith("db-0", corev1.PodRunning, "data")
	pod.Namespace = "shop"
	held := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1", Annotations: map[string]string{AnnotationReclaimPolicy: "Delete"}},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain}}
	copyPV := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "moved-m", UID: "pv-copy", Finalizers: []string{provisionerFinalizer}}}
	r, mv := fixture(&pod, copyPV)
	// The fixture's source volume, held by the switch's earlier step.
	if err := r.Client.Delete(context.Background(), &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Client.Create(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	staged := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop-home", Name: "data", Labels: map[string]string{LabelVolumeMove: "shop.m"}}}
	provider := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(staged).Build()
	r.Clusters = fakeProvider{provider}
	mv.Status = ferryv1alpha1.VolumeMoveStatus{Phase: ferryv1alpha1.MoveSwitching, ClaimUID: "u1",
		Source: ferryv1alpha1.VolumeMoveEndpoint{Cluster: "home", Volume: "pvc-u1"},
		Target: ferryv1alpha1.VolumeMoveEndpoint{Cluster: "rome", Claim: "shop-home/data"}}
	ctx := context.Background()
	var pv corev1.PersistentVolume
	if err := r.Client.Get(ctx, types.NamespacedName{Name: "moved-m"}, &pv); err != nil {
		t.Fatal(err)
	}
	abandoned, err := r.abandonIfUsed(ctx, mv, &pv)
	if err != nil || !abandoned {
		t.Fatalf("abandonIfUsed = %v, %v; want abandoned", abandoned, err)
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: "moved-m"}, &pv); !apierrors.IsNotFound(err) {
		t.Errorf("the copy's volume is still there: %v %v", pv.Finalizers, err)
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: "pvc-u1"}, &pv); err != nil || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("the source's reclaim policy is %s (%v), want Delete back", pv.Spec.PersistentVolumeReclaimPolicy, err)
	}
	var claim corev1.PersistentVolumeClaim
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "data"}, &claim); err != nil || claim.UID != "u1" || claim.Spec.VolumeName != "pvc-u1" || !claim.DeletionTimestamp.IsZero() {
		t.Errorf("the claim was touched: %+v %v", claim.ObjectMeta, err)
	}
	if err := provider.Get(ctx, client.ObjectKeyFromObject(staged), &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("the staged claim is still in the provider: %v", err)
	}
	var got ferryv1alpha1.VolumeMove
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(mv), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != ferryv1alpha1.MoveFailed || readyReason(&got) != ferryv1alpha1.MoveReasonWorkloadRunning {
		t.Errorf("move %s / %s, want Failed / WorkloadRunning", got.Status.Phase, readyReason(&got))
	}

	// Without a pod using it, the switch goes on.
	r2, mv2 := fixture(copyPV.DeepCopy())
	mv2.Status = mv.Status
	if abandoned, err := r2.abandonIfUsed(ctx, mv2, copyPV.DeepCopy()); abandoned || err != nil {
		t.Errorf("abandonIfUsed without pods = %v, %v", abandoned, err)
	}
}
