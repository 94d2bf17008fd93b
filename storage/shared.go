package storage

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// The rules below are shared with the controllers built on the storage
// fabric (storage/move): the volumes, claims and labels they make must be
// the ones the provisioner, the volume controller and the collectors take
// for their own.

// RemoteRef names a provider's claim holding a remote volume's data.
type RemoteRef = remoteRef

// RemoteRefOf reads where a remote volume's data is; ok is false for a
// volume that is not remote.
func RemoteRefOf(pv *corev1.PersistentVolume) (RemoteRef, bool) { return remoteRefOf(pv) }

// BackingClaimOf reads the real claim of a volume bound on a real node.
func BackingClaimOf(pv *corev1.PersistentVolume) (namespace, name string, ok bool) {
	return backingClaimOf(pv)
}

// RemoteVolume is the local volume standing for the provider's claim ref.
func RemoteVolume(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, ref RemoteRef, providerClass string) *corev1.PersistentVolume {
	return remoteVolume(name, pvc, class, ref, providerClass)
}

// RealVolume is the volume binding pvc to the data of a real claim's volume.
func RealVolume(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, real *corev1.PersistentVolumeClaim, backing *corev1.PersistentVolume) *corev1.PersistentVolume {
	return realVolume(name, pvc, class, real, backing)
}

// OriginLabels say which consumer claim a claim made for it stands for.
func OriginLabels(cluster ferryv1alpha1.ClusterID, pvc *corev1.PersistentVolumeClaim) map[string]string {
	return originLabels(cluster, pvc)
}

// ClaimSpecFor is the spec of a claim made for pvc with class className.
func ClaimSpecFor(pvc *corev1.PersistentVolumeClaim, className string) corev1.PersistentVolumeClaimSpec {
	return claimSpecFor(pvc, className)
}

// RequestedClass is the class the claim asked for ("" for the default).
func RequestedClass(pvc *corev1.PersistentVolumeClaim) string { return requestedClass(pvc) }

// MadeByStorage says whether the storage fabric made a claim.
func MadeByStorage(made *corev1.PersistentVolumeClaim) bool { return madeByStorage(made) }

// RealClass is the StorageClass of this cluster serving requested ("" for
// the default), as the provisioner resolves it.
func (p *Provisioner) RealClass(ctx context.Context, requested string) (*storagev1.StorageClass, error) {
	return p.realClass(ctx, requested)
}
