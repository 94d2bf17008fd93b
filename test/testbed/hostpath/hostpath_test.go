package hostpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func class(name string, params map[string]string, policy *corev1.PersistentVolumeReclaimPolicy) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Parameters: params, ReclaimPolicy: policy}
}

func claim(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
			VolumeMode:  ptr.To(corev1.PersistentVolumeFilesystem),
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func newProvisioner(t *testing.T) (*Provisioner, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "volumes")
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	return p, root
}

func TestProvisionPinsTheVolumeToTheSelectedNode(t *testing.T) {
	p, root := newProvisioner(t)
	pv, state, err := p.Provision(t.Context(), controller.ProvisionOptions{
		StorageClass: class("standard", nil, nil), PVName: "pvc-1", PVC: claim("data", "3Gi"), SelectedNodeName: "n-1",
	})
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision: %v, %v", state, err)
	}
	dir := filepath.Join(root, "pvc-1")
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Errorf("source %+v, want hostPath %s", pv.Spec.PersistentVolumeSource, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("volume directory %s: %v", dir, err)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("capacity %s, want the claim's 3Gi", got.String())
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaim policy %s, want Delete for a class without one", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != corev1.ReadWriteOncePod || pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("access modes %v, volume mode %v: want the claim's", pv.Spec.AccessModes, pv.Spec.VolumeMode)
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 {
		t.Fatalf("node affinity %+v, want one term", terms)
	}
	if e := terms[0].MatchExpressions[0]; e.Key != LabelHostname || e.Operator != corev1.NodeSelectorOpIn || len(e.Values) != 1 || e.Values[0] != "n-1" {
		t.Errorf("node affinity %+v, want %s In [n-1]", e, LabelHostname)
	}
}

func TestProvisionWithoutSelectedNodePinsToNoNodeAndKeepsTheClassPolicy(t *testing.T) {
	p, _ := newProvisioner(t)
	pv, _, err := p.Provision(t.Context(), controller.ProvisionOptions{
		StorageClass: class("immediate", map[string]string{ParameterCapacity: "1Gi"}, ptr.To(corev1.PersistentVolumeReclaimRetain)),
		PVName:       "pvc-1", PVC: claim("data", "5Gi"),
	})
	if err != nil {
		t.Fatalf("Provision: %v (no node, so no per-node capacity applies)", err)
	}
	if pv.Spec.NodeAffinity != nil {
		t.Errorf("node affinity %+v, want none", pv.Spec.NodeAffinity)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %s, want the class's Retain", pv.Spec.PersistentVolumeReclaimPolicy)
	}
}

func TestProvisionReschedulesWhenTheNodeIsOutOfTheClassCapacity(t *testing.T) {
	p, root := newProvisioner(t)
	fast := class("fast", map[string]string{ParameterCapacity: "10Gi"}, nil)
	provision := func(pvName, node, size string) (controller.ProvisioningState, error) {
		_, state, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: fast, PVName: pvName, PVC: claim(pvName, size), SelectedNodeName: node})
		return state, err
	}
	if _, err := provision("pvc-a", "n-0", "6Gi"); err != nil {
		t.Fatal(err)
	}
	state, err := provision("pvc-b", "n-0", "6Gi")
	if state != controller.ProvisioningReschedule || err == nil {
		t.Fatalf("second 6Gi on a 10Gi node: %v, %v; want %v", state, err, controller.ProvisioningReschedule)
	}
	for _, want := range []string{"n-0", "fast", "4Gi", "10Gi"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pvc-b")); !os.IsNotExist(err) {
		t.Errorf("a refused volume left a directory (stat: %v)", err)
	}
	if _, err := provision("pvc-c", "n-1", "6Gi"); err != nil {
		t.Errorf("another node has its own capacity: %v", err)
	}
	if _, _, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: class("other", map[string]string{ParameterCapacity: "10Gi"}, nil), PVName: "pvc-d", PVC: claim("d", "6Gi"), SelectedNodeName: "n-0"}); err != nil {
		t.Errorf("another class has its own capacity: %v", err)
	}

	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-a"}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(root, "pvc-a")}},
	}}
	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if _, err := provision("pvc-b", "n-0", "6Gi"); err != nil {
		t.Errorf("after deleting pvc-a the node has room again: %v", err)
	}
}

func TestDeleteRemovesOnlyItsOwnDirectories(t *testing.T) {
	p, root := newProvisioner(t)
	pv, _, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: class("standard", nil, nil), PVName: "pvc-1", PVC: claim("data", "1Gi"), SelectedNodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pv.Spec.HostPath.Path, "data"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	elsewhere := t.TempDir()
	foreign := []*corev1.PersistentVolume{
		{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "s", Path: "/"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pvc-2"}, Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: elsewhere}}}},
	}
	for _, f := range foreign {
		var ignored *controller.IgnoredError
		if err := p.Delete(t.Context(), f); !errors.As(err, &ignored) {
			t.Errorf("Delete(%s) = %v, want an IgnoredError", f.Name, err)
		}
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("a foreign hostPath was touched: %v", err)
	}

	if err := p.Delete(t.Context(), pv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pvc-1")); !os.IsNotExist(err) {
		t.Errorf("volume directory still there after Delete (stat: %v)", err)
	}
}

func TestProvisionRefusesBadClassParameters(t *testing.T) {
	p, _ := newProvisioner(t)
	for named, params := range map[string]map[string]string{
		"capacty":  {"capacty": "1Gi"},
		"ten gigs": {ParameterCapacity: "ten gigs"},
	} {
		_, state, err := p.Provision(t.Context(), controller.ProvisionOptions{StorageClass: class("bad", params, nil), PVName: "pvc-1", PVC: claim("data", "1Gi"), SelectedNodeName: "n"})
		if err == nil || state != controller.ProvisioningFinished || !strings.Contains(err.Error(), named) {
			t.Errorf("parameters %v: %v, %v; want a final error naming %q", params, state, err, named)
		}
	}
}
