package reflection

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// pvcProviderOwned are the prefixes of the annotations the provider's volume
// controllers and scheduler put on a PVC (binding, provisioner, selected
// node). The local PVC's are the consumer's: they are not copied.
var pvcProviderOwned = []string{"pv.kubernetes.io/", "volume.kubernetes.io/", "volume.beta.kubernetes.io/"}

// pvcTranslator reflects PersistentVolumeClaims, so offloaded pods get a
// volume on the provider. Claims of ferry's virtual storage class are not
// reflected: the storage fabric makes their provider claims, one owner per
// remote claim. The remote copy has the local one's access modes,
// resources and volume mode, and its storage class mapped through
// Env.StorageClasses: an unmapped class is dropped, so the provider's default
// class provisions the volume. The selector, data sources and volume
// attributes class name consumer objects and are dropped.
//
// The provider binds the copy: its volume name, binding annotations and the
// class it defaults when none is mapped are neither compared nor changed.
//
// Most of a PVC's spec is immutable once created: equal compares the access
// modes, volume mode and storage class too, so drift shows, but merge only
// applies the metadata and the storage requests (an expansion); the rest
// stays as created, and a PVC holds data, so it is not recreated.
type pvcTranslator struct{}

var _ translator = pvcTranslator{}

func (pvcTranslator) desired(env *Env, local client.Object, twinNamespace string) (client.Object, string, error) {
	pvc, ok := local.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, "", fmt.Errorf("reflect a PersistentVolumeClaim: got a %T", local)
	}
	if pvcClass(pvc) == ferryv1alpha1.StorageClassVirtual {
		return nil, "the storage fabric provisions claims of the virtual storage class", nil
	}
	meta := remoteMeta(env, pvc, twinNamespace)
	meta.Annotations = withoutPrefixes(meta.Annotations, pvcProviderOwned)
	s := pvc.Spec.DeepCopy()
	spec := corev1.PersistentVolumeClaimSpec{
		AccessModes: s.AccessModes,
		Resources:   s.Resources,
		VolumeMode:  s.VolumeMode,
	}
	if to := mapClass(env.StorageClasses, pvcClass(pvc)); to != "" {
		spec.StorageClassName = &to
	}
	return &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: spec}, "", nil
}

func (pvcTranslator) equal(want, remote client.Object) bool {
	w, r := want.(*corev1.PersistentVolumeClaim), remote.(*corev1.PersistentVolumeClaim)
	return metaEqual(w, r, pvcProviderOwned...) &&
		equality.Semantic.DeepEqual(w.Spec.Resources.Requests, r.Spec.Resources.Requests) &&
		slices.Equal(w.Spec.AccessModes, r.Spec.AccessModes) &&
		pvcVolumeMode(&w.Spec) == pvcVolumeMode(&r.Spec) &&
		(w.Spec.StorageClassName == nil || ptr.Equal(w.Spec.StorageClassName, r.Spec.StorageClassName))
}

func (pvcTranslator) merge(want, remote client.Object) client.Object {
	w, merged := want.(*corev1.PersistentVolumeClaim).DeepCopy(), remote.(*corev1.PersistentVolumeClaim).DeepCopy()
	mergeMeta(w, merged, pvcProviderOwned...)
	merged.Spec.Resources.Requests = w.Spec.Resources.Requests
	return merged
}

// isStorageFabricClaim tells the provider's claims the storage fabric made
// (for claims of the virtual class): they are its own, never reflection's.
func isStorageFabricClaim(o client.Object) bool {
	return o.GetLabels()[ferryv1alpha1.LabelManagedBy] == ferryv1alpha1.ManagedByStorage
}

// pvcClass is pvc's storage class, "" for none: the deprecated annotation
// wins over the field, as it does for the volume controllers.
func pvcClass(pvc *corev1.PersistentVolumeClaim) string {
	if class, ok := pvc.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		return class
	}
	return ptr.Deref(pvc.Spec.StorageClassName, "")
}

// pvcVolumeMode is spec's volume mode as the API server defaults it.
func pvcVolumeMode(spec *corev1.PersistentVolumeClaimSpec) corev1.PersistentVolumeMode {
	return ptr.Deref(spec.VolumeMode, corev1.PersistentVolumeFilesystem)
}
