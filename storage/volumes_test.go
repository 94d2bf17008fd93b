package storage

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/storage/volume"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func claim(size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-web-0", UID: "uid-1",
			Annotations: map[string]string{ferryv1alpha1.AnnotationRequestedStorageClass: "fast"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: new(ferryv1alpha1.StorageClassVirtual),
		},
	}
}

func virtualNode(name, cluster string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual, ferryv1alpha1.LabelClusterID: cluster,
	}}}
}

// The local volume standing for a provider's claim must say where the data
// is (placement.VolumeCluster), admit only that provider's virtual nodes,
// and never be mountable by a local kubelet.
func TestRemoteVolumeLivesInItsProvider(t *testing.T) {
	pvc := claim("2Gi")
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ferry"}}
	ref := remoteRef{Cluster: "eu-1", Namespace: "shop-home", Name: "data-web-0"}
	pv := remoteVolume("pvc-uid-1", pvc, class, ref, "standard")
	if got := placement.VolumeCluster(pv); got != "eu-1" {
		t.Errorf("VolumeCluster = %q, want eu-1", got)
	}
	for node, want := range map[*corev1.Node]bool{
		virtualNode("ferry-eu-1", "eu-1"): true,
		virtualNode("ferry-us-1", "us-1"): false,
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{ferryv1alpha1.LabelClusterID: "eu-1"}}}: false,
	} {
		ok := volume.CheckNodeAffinity(pv, node.Labels) == nil
		if ok != want {
			t.Errorf("node %s admitted = %v, want %v", node.Name, ok, want)
		}
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriver || pv.Spec.HostPath != nil {
		t.Errorf("source = %+v, want CSI driver %s only", pv.Spec.PersistentVolumeSource, CSIDriver)
	}
	if got, ok := remoteRefOf(pv); !ok || got != ref {
		t.Errorf("remoteRefOf = %v, %v; want %v", got, ok, ref)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaim policy %s, want Delete (the class's default)", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("capacity %s, want the request until the provider reports", q.String())
	}
}

// A volume bound on a real node shares the real volume's source and node
// affinity, and keeps the virtual class's reclaim policy.
func TestRealVolumeSharesTheBackingVolume(t *testing.T) {
	retain := corev1.PersistentVolumeReclaimRetain
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ferry"}, ReclaimPolicy: &retain}
	real := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-storage", Name: "pvc-uid-1"}}
	affinity := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"worker-1"}}},
	}}}}
	backing := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-real"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/x"}},
			NodeAffinity:           affinity,
		},
	}
	pv := realVolume("pvc-uid-1", claim("2Gi"), class, real, backing)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != "/data/x" || pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "worker-1" {
		t.Errorf("volume %+v does not share the backing source and affinity", pv.Spec)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %s, want the class's Retain", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if ns, name, ok := backingClaimOf(pv); !ok || ns != "ferry-storage" || name != "pvc-uid-1" {
		t.Errorf("backingClaimOf = %s/%s %v", ns, name, ok)
	}
	if placement.VolumeCluster(pv) != placement.LocalCluster {
		t.Error("a real volume is placed in a provider")
	}
	backing.Spec.HostPath.Path = "/changed"
	if pv.Spec.HostPath.Path != "/data/x" {
		t.Error("the volume shares memory with the backing volume")
	}
}

func TestClaimsTheVirtualClassCannotServeNameTheField(t *testing.T) {
	withSelector := claim("1Gi")
	withSelector.Spec.Selector = &metav1.LabelSelector{}
	withSource := claim("1Gi")
	withSource.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "seed"}
	noSize := claim("1Gi")
	noSize.Spec.Resources.Requests = nil
	for pvc, want := range map[*corev1.PersistentVolumeClaim]string{
		claim("1Gi"): "",
		withSelector: "spec.selector",
		withSource:   "spec.dataSourceRef",
		noSize:       "spec.resources.requests.storage",
	} {
		err := errClaimNotSupported(pvc)
		switch {
		case want == "" && err != nil:
			t.Errorf("valid claim refused: %v", err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("error %v, want one naming %s", err, want)
		}
	}
}

func TestOriginLabelsTellTheClaimTheyStandFor(t *testing.T) {
	pvc := claim("1Gi")
	made := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Labels: originLabels("home", pvc)}}
	if !standsFor(made, pvc.UID) {
		t.Error("a claim made for pvc does not stand for it")
	}
	other := claim("1Gi")
	other.UID = "uid-2" // recreated under the same name
	if standsFor(made, other.UID) {
		t.Error("a claim made for a predecessor stands for its successor")
	}
	spec := claimSpecFor(pvc, "standard")
	if *spec.StorageClassName != "standard" || spec.Selector != nil {
		t.Errorf("claim spec %+v", spec)
	}
}
