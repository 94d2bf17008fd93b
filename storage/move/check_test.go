package move

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/storage"
)

type noProviders struct{}

func (noProviders) Provider(_ context.Context, id ferryv1alpha1.ClusterID) (*Cluster, error) {
	return &Cluster{}, nil
}

// fixture: claim shop/data held locally (a backing claim), a provider rome
// whose virtual node serves only class "fast", the namespace offloaded.
func fixture(extra ...client.Object) (*Reconciler, *ferryv1alpha1.VolumeMove) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data", UID: "u1", Annotations: map[string]string{ferryv1alpha1.AnnotationRequestedStorageClass: "standard"}},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(ferryv1alpha1.StorageClassVirtual), VolumeName: "pvc-u1"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1", Annotations: map[string]string{storage.AnnotationBackingClaim: "ferry-storage/pvc-u1"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-rome", Labels: map[string]string{
		ferryv1alpha1.LabelClusterID: "rome", ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual},
		Annotations: map[string]string{ferryv1alpha1.AnnotationStorageClasses: `[{"name":"fast","providerClass":"ssd"}]`}}}
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: ferryv1alpha1.NamespaceOffloadingName},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "rome", Phase: ferryv1alpha1.OffloadingReady, TwinNamespace: "shop-home"}}}}
	mv := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "m", UID: "m"}, Spec: ferryv1alpha1.VolumeMoveSpec{ClaimName: "data", TargetCluster: "rome"}}
	objs := append([]client.Object{pvc, pv, node, nso, mv}, extra...)
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(objs...).WithStatusSubresource(&ferryv1alpha1.NamespaceOffloading{}, &ferryv1alpha1.VolumeMove{}).Build()
	return &Reconciler{Client: c, Clusters: noProviders{}, Options: Options{ClusterID: "home", Namespace: "ferry-storage"}}, mv
}

func refusalOf(t *testing.T, err error) *refusal {
	t.Helper()
	var ref *refusal
	if !errors.As(err, &ref) {
		t.Fatalf("want a refusal, got %v", err)
	}
	return ref
}

func TestCheckRefusesPodsUsingTheClaim(t *testing.T) {
	p1 := podWith("web-0", corev1.PodRunning, "data")
	p1.Namespace = "shop"
	r, mv := fixture(&p1)
	_, _, _, err := r.check(context.Background(), mv)
	ref := refusalOf(t, err)
	if ref.reason != ferryv1alpha1.MoveReasonWorkloadRunning || !strings.Contains(ref.msg, "web-0") {
		t.Fatalf("refusal %s: %s; want WorkloadRunning naming web-0", ref.reason, ref.msg)
	}
}

func TestCheckRefusesClassNotOffered(t *testing.T) {
	r, mv := fixture()
	_, _, _, err := r.check(context.Background(), mv)
	ref := refusalOf(t, err)
	if ref.reason != ferryv1alpha1.MoveReasonClassNotOffered || !strings.Contains(ref.msg, `"standard"`) {
		t.Fatalf("refusal %s: %s; want ClassNotOffered naming the class", ref.reason, ref.msg)
	}
}

func TestCheckRefusesSecondMove(t *testing.T) {
	first := &ferryv1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "first", UID: "f"},
		Spec: ferryv1alpha1.VolumeMoveSpec{ClaimName: "data", TargetCluster: "rome"}, Status: ferryv1alpha1.VolumeMoveStatus{Phase: ferryv1alpha1.MoveCopying}}
	r, mv := fixture(first)
	_, _, _, err := r.check(context.Background(), mv)
	ref := refusalOf(t, err)
	if ref.reason != ferryv1alpha1.MoveReasonMoveInProgress || !strings.Contains(ref.msg, "first") {
		t.Fatalf("refusal %s: %s; want MoveInProgress naming the first", ref.reason, ref.msg)
	}
}

func TestCheckPassesAndNamesSource(t *testing.T) {
	r, mv := fixture()
	node := &corev1.Node{}
	_ = r.Client.Get(context.Background(), client.ObjectKey{Name: "ferry-rome"}, node)
	node.Annotations[ferryv1alpha1.AnnotationStorageClasses] = `[{"name":"standard","providerClass":"hdd"}]`
	if err := r.Client.Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	_, _, src, err := r.check(context.Background(), mv)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if src.Cluster != "home" || src.Claim != "ferry-storage/pvc-u1" || src.Volume != "pvc-u1" {
		t.Fatalf("source %+v", src)
	}
	mv.Spec.TargetCluster = "home"
	_, _, _, err = r.check(context.Background(), mv)
	if ref := refusalOf(t, err); ref.reason != ferryv1alpha1.MoveReasonAlreadyThere {
		t.Fatalf("move home from home: %s", ref.reason)
	}
}
