package reflection

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// localPVC is a PVC as the consumer serves it once bound: with the
// consumer's binding annotations, volume and data source.
func localPVC() *corev1.PersistentVolumeClaim {
	meta := localObjectMeta("data")
	maps.Copy(meta.Annotations, map[string]string{
		"pv.kubernetes.io/bind-completed":               "yes",
		"pv.kubernetes.io/bound-by-controller":          "yes",
		"volume.kubernetes.io/storage-provisioner":      "csi.consumer.example.com",
		"volume.kubernetes.io/selected-node":            "ferry-provider",
		"volume.beta.kubernetes.io/storage-provisioner": "csi.consumer.example.com",
	})
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
			StorageClassName:          new("fast"),
			VolumeMode:                new(corev1.PersistentVolumeFilesystem),
			VolumeName:                "pvc-local-uid",
			Selector:                  &metav1.LabelSelector{MatchLabels: map[string]string{"disk": "ssd"}},
			DataSource:                &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "seed"},
			DataSourceRef:             &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "seed"},
			VolumeAttributesClassName: new("gold"),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// bindOnProvider is what the provider's volume controllers make of want.
func bindOnProvider(want *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	pvc := want.DeepCopy()
	assignIdentity(pvc)
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	maps.Copy(pvc.Annotations, map[string]string{
		"pv.kubernetes.io/bind-completed":          "yes",
		"pv.kubernetes.io/bound-by-controller":     "yes",
		"volume.kubernetes.io/storage-provisioner": "csi.provider.example.com",
		"volume.kubernetes.io/selected-node":       "provider-worker-3",
	})
	pvc.Finalizers = []string{"kubernetes.io/pvc-protection"}
	pvc.Spec.VolumeName = "pvc-remote-uid"
	if pvc.Spec.StorageClassName == nil {
		pvc.Spec.StorageClassName = new("provider-default")
	}
	if pvc.Spec.VolumeMode == nil {
		pvc.Spec.VolumeMode = new(corev1.PersistentVolumeFilesystem)
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{
		Phase:    corev1.ClaimBound,
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
	}
	return pvc
}

func TestPVCTranslatorDesired(t *testing.T) {
	tests := []struct {
		name      string
		classes   map[string]string // translatorEnv's when nil
		change    func(*corev1.PersistentVolumeClaim)
		wantClass *string
	}{
		{name: "mapped class", change: func(*corev1.PersistentVolumeClaim) {}, wantClass: new("provider-ssd")},
		{name: "unmapped class", change: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = new("slow") }},
		{name: "other class through *", classes: map[string]string{"*": "provider-hdd"},
			change: func(*corev1.PersistentVolumeClaim) {}, wantClass: new("provider-hdd")},
		{name: "no class through *", classes: map[string]string{"*": "provider-hdd"},
			change: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = nil }, wantClass: new("provider-hdd")},
		{name: "no class", change: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = nil }},
		{name: "deprecated annotation wins", change: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Annotations[corev1.BetaStorageClassAnnotation] = "fast"
			pvc.Spec.StorageClassName = new("slow")
		}, wantClass: new("provider-ssd")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := translatorEnv()
			if tt.classes != nil {
				env.StorageClasses = tt.classes
			}
			local := localPVC()
			tt.change(local)
			before := local.DeepCopy()
			got, skip, err := pvcTranslator{}.desired(env, local, "shop-home")
			if err != nil || skip != "" {
				t.Fatalf("desired: %v, skip %q", err, skip)
			}
			want := got.(*corev1.PersistentVolumeClaim)
			checkReflectedMeta(t, want, "data", reflectedLabels(nil))
			wantSpec := corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				VolumeMode:       new(corev1.PersistentVolumeFilesystem),
				StorageClassName: tt.wantClass,
			}
			if !equality.Semantic.DeepEqual(want.Spec, wantSpec) {
				t.Errorf("spec =\n%+v\nwant\n%+v", want.Spec, wantSpec)
			}
			if !equality.Semantic.DeepEqual(want.Status, corev1.PersistentVolumeClaimStatus{}) {
				t.Errorf("status copied: %+v", want.Status)
			}
			if !equality.Semantic.DeepEqual(local, before) {
				t.Error("desired changed the local PVC")
			}
		})
	}
}

func TestPVCTranslatorEqual(t *testing.T) {
	tests := []struct {
		name    string
		classes map[string]string // translatorEnv's when nil
		change  func(*corev1.PersistentVolumeClaim)
		equal   bool
	}{
		{name: "bound by the provider", change: func(*corev1.PersistentVolumeClaim) {}, equal: true},
		{name: "provider's default class", classes: map[string]string{}, change: func(*corev1.PersistentVolumeClaim) {}, equal: true},
		{name: "same request, other unit", change: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1024Mi")
		}, equal: true},
		{name: "expanded locally", change: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
		}},
		{name: "access modes differ", change: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
		}},
		{name: "volume mode differs", change: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.VolumeMode = new(corev1.PersistentVolumeBlock)
		}},
		{name: "class differs", change: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = new("provider-hdd") }},
		{name: "label removed", change: func(pvc *corev1.PersistentVolumeClaim) { delete(pvc.Labels, "app") }},
		{name: "user annotation added", change: func(pvc *corev1.PersistentVolumeClaim) { pvc.Annotations["someone"] = "else" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := translatorEnv()
			if tt.classes != nil {
				env.StorageClasses = tt.classes
			}
			want, _, err := pvcTranslator{}.desired(env, localPVC(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := bindOnProvider(want.(*corev1.PersistentVolumeClaim))
			tt.change(remote)
			if got := (pvcTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestPVCTranslatorMerge(t *testing.T) {
	tr := pvcTranslator{}
	env := translatorEnv()
	env.StorageClasses = map[string]string{}
	want, _, err := tr.desired(env, localPVC(), "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := bindOnProvider(want.(*corev1.PersistentVolumeClaim))
	remote.Labels = map[string]string{"stale": "x"}
	remote.Annotations["note"] = "old"

	local := localPVC()
	local.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("5Gi")
	want, _, err = tr.desired(env, local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	before := remote.DeepCopy()

	merged := tr.merge(want, remote).(*corev1.PersistentVolumeClaim)
	checkKeptIdentity(t, merged)
	if got := merged.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("5Gi")) != 0 {
		t.Errorf("storage request = %s, want 5Gi", got.String())
	}
	if merged.Spec.VolumeName != "pvc-remote-uid" || ptr.Deref(merged.Spec.StorageClassName, "") != "provider-default" {
		t.Errorf("merge changed the binding: volume %q, class %v", merged.Spec.VolumeName, merged.Spec.StorageClassName)
	}
	for k, v := range before.Annotations {
		if k != "note" && merged.Annotations[k] != v {
			t.Errorf("merge dropped the provider's annotation %s", k)
		}
	}
	if merged.Annotations["note"] != "kept" || merged.Labels["stale"] != "" {
		t.Errorf("metadata not applied: %v %v", merged.Labels, merged.Annotations)
	}
	if !equality.Semantic.DeepEqual(merged.Finalizers, before.Finalizers) || !equality.Semantic.DeepEqual(merged.Status, before.Status) {
		t.Error("merge dropped the provider's finalizers or status")
	}
	if !tr.equal(want, merged) {
		t.Errorf("merged copy %+v does not equal %+v", merged, want)
	}
	if !equality.Semantic.DeepEqual(remote, before) {
		t.Error("merge changed the remote object")
	}
}

func TestPVCTranslatorMergeLeavesImmutableFields(t *testing.T) {
	tr := pvcTranslator{}
	want, _, err := tr.desired(translatorEnv(), localPVC(), "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := bindOnProvider(want.(*corev1.PersistentVolumeClaim))
	remote.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	remote.Spec.StorageClassName = new("provider-hdd")

	merged := tr.merge(want, remote).(*corev1.PersistentVolumeClaim)
	if !equality.Semantic.DeepEqual(merged.Spec, remote.Spec) {
		t.Errorf("merge changed immutable fields: %+v", merged.Spec)
	}
	if tr.equal(want, merged) {
		t.Error("the drift of immutable fields no longer shows")
	}
}

// Claims of the virtual storage class belong to the storage fabric: they
// are not reflected, and the provider claims it made are not taken for
// stale copies (which the reflector would delete).
func TestPVCOfVirtualClassIsLeftToTheStorageFabric(t *testing.T) {
	pvc := localPVC()
	pvc.Spec.StorageClassName = new(ferryv1alpha1.StorageClassVirtual)
	want, skip, err := pvcTranslator{}.desired(&Env{}, pvc, "twin")
	if err != nil || want != nil || skip == "" {
		t.Fatalf("desired = %v, %q, %v; want no copy and a reason", want, skip, err)
	}
	made := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		ferryv1alpha1.LabelManagedBy: ferryv1alpha1.ManagedByStorage, ferryv1alpha1.LabelOriginCluster: "consumer",
	}}}
	if !isStorageFabricClaim(made) {
		t.Error("the storage fabric's provider claim is not ignored by reflection")
	}
	if isStorageFabricClaim(bindOnProvider(pvc)) {
		t.Error("a reflected copy is taken for the storage fabric's")
	}
}
