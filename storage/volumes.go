package storage

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// CSIDriver names the volumes that stand for a claim in a provider: the
// PersistentVolume source of a remote volume is CSI with this driver (a
// CSIDriver object with attachRequired false is installed with the class),
// so no kubelet or attach controller ever tries to mount it locally, and
// `kubectl describe pv` says where the data is.
const CSIDriver = "virtual.storage.ferry.io"

// Annotations and labels on the objects the storage fabric makes.
const (
	// AnnotationBackingClaim, on a volume bound on a real node, names the
	// claim (namespace/name) of the real class that holds its data.
	AnnotationBackingClaim = "storage.ferry.io/backing-claim"
	// AnnotationRemoteClaim, on a remote volume, names the provider's claim
	// (twin namespace/name) that holds its data.
	AnnotationRemoteClaim = "storage.ferry.io/remote-claim"
	// AnnotationRemoteClass is the provider's StorageClass of that claim.
	AnnotationRemoteClass = "storage.ferry.io/remote-storage-class"
	// AnnotationRemotePhase is the provider's claim's phase as last seen.
	AnnotationRemotePhase = "storage.ferry.io/remote-phase"
	// AnnotationRemoteVolume is the provider's volume bound to that claim.
	AnnotationRemoteVolume = "storage.ferry.io/remote-volume"
)

// errClaimNotSupported reports a claim the virtual class cannot serve,
// naming the field.
func errClaimNotSupported(pvc *corev1.PersistentVolumeClaim) error {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if pvc.Spec.Selector != nil {
		errs = append(errs, field.Forbidden(spec.Child("selector"), "a claim of the ferry storage class is provisioned, never matched to an existing volume by selector"))
	}
	if pvc.Spec.DataSource != nil || pvc.Spec.DataSourceRef != nil {
		errs = append(errs, field.Forbidden(spec.Child("dataSourceRef"), "the ferry storage class does not clone or restore volumes"))
	}
	if _, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(spec.Child("resources", "requests", "storage"), ""))
	}
	if len(errs) == 0 {
		return nil
	}
	return errs.ToAggregate()
}

// requestedClass is the class the claim asked for before ferry's webhook
// moved it to the virtual class; "" for the cluster default. A claim of the
// virtual class made without the webhook asked for the default.
func requestedClass(pvc *corev1.PersistentVolumeClaim) string {
	return pvc.Annotations[ferryv1alpha1.AnnotationRequestedStorageClass]
}

// reclaimPolicy is the class's reclaim policy, Delete when unset.
func reclaimPolicy(class *storagev1.StorageClass) corev1.PersistentVolumeReclaimPolicy {
	return ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete)
}

// claimSpecFor is the spec of a claim made for pvc (in the storage
// namespace or a provider), with class className.
func claimSpecFor(pvc *corev1.PersistentVolumeClaim, className string) corev1.PersistentVolumeClaimSpec {
	s := pvc.Spec.DeepCopy()
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      s.AccessModes,
		Resources:        s.Resources,
		VolumeMode:       s.VolumeMode,
		StorageClassName: &className,
	}
}

// originLabels say which consumer claim a claim made for it stands for.
func originLabels(cluster ferryv1alpha1.ClusterID, pvc *corev1.PersistentVolumeClaim) map[string]string {
	return map[string]string{
		ferryv1alpha1.LabelManagedBy:       ferryv1alpha1.ManagedByStorage,
		ferryv1alpha1.LabelOriginCluster:   string(cluster),
		ferryv1alpha1.LabelOriginNamespace: pvc.Namespace,
		ferryv1alpha1.LabelOriginName:      pvc.Name,
		ferryv1alpha1.LabelOriginUID:       string(pvc.UID),
	}
}

// madeByStorage says whether the storage fabric made a claim.
func madeByStorage(made *corev1.PersistentVolumeClaim) bool {
	return made.Labels[ferryv1alpha1.LabelManagedBy] == ferryv1alpha1.ManagedByStorage
}

// standsFor says whether a claim made by the storage fabric stands for the
// user's claim of UID uid.
func standsFor(made *corev1.PersistentVolumeClaim, uid types.UID) bool {
	return madeByStorage(made) && made.Labels[ferryv1alpha1.LabelOriginUID] == string(uid)
}

// originLive says whether the user's claim a claim made by the storage
// fabric stands for still exists, as that claim (not a successor of the
// same name), and is not being deleted.
func originLive(ctx context.Context, r client.Reader, made *corev1.PersistentVolumeClaim) (bool, error) {
	key := types.NamespacedName{Namespace: made.Labels[ferryv1alpha1.LabelOriginNamespace], Name: made.Labels[ferryv1alpha1.LabelOriginName]}
	var origin corev1.PersistentVolumeClaim
	if err := r.Get(ctx, key, &origin); apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read claim %s: %w", key, err)
	}
	return standsFor(made, origin.UID) && origin.DeletionTimestamp.IsZero(), nil
}

// realVolume is the volume binding pvc, on a real node, to the data of the
// real claim's volume: same source, capacity and node affinity, the virtual
// class's reclaim policy (deleting the volume deletes the real claim, whose
// own volume then follows its class's policy).
func realVolume(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, real *corev1.PersistentVolumeClaim, backing *corev1.PersistentVolume) *corev1.PersistentVolume {
	b := backing.Spec.DeepCopy()
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{AnnotationBackingClaim: real.Namespace + "/" + real.Name},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      b.Capacity,
			PersistentVolumeSource:        b.PersistentVolumeSource,
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeReclaimPolicy: reclaimPolicy(class),
			MountOptions:                  b.MountOptions,
			NodeAffinity:                  b.NodeAffinity,
		},
	}
}

// remoteRef names a provider's claim holding a remote volume's data.
type remoteRef struct {
	Cluster   ferryv1alpha1.ClusterID
	Namespace string
	Name      string
}

func (r remoteRef) String() string { return string(r.Cluster) + "/" + r.Namespace + "/" + r.Name }

// remoteVolume is the local volume standing for the provider's claim ref:
// labelled with the provider's ClusterID (placement.VolumeCluster), pinned
// to that provider's virtual nodes, its capacity the request until the
// provider reports the real one.
func remoteVolume(name string, pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, ref remoteRef, providerClass string) *corev1.PersistentVolume {
	request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{ferryv1alpha1.LabelClusterID: string(ref.Cluster)},
			Annotations: map[string]string{
				AnnotationRemoteClaim: ref.Namespace + "/" + ref.Name,
				AnnotationRemoteClass: providerClass,
				AnnotationRemotePhase: string(corev1.ClaimPending),
			},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: request.DeepCopy()},
			AccessModes: pvc.Spec.AccessModes,
			VolumeMode:  pvc.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:       CSIDriver,
				VolumeHandle: ref.String(),
				VolumeAttributes: map[string]string{
					"cluster": string(ref.Cluster), "namespace": ref.Namespace, "name": ref.Name,
				},
			}},
			PersistentVolumeReclaimPolicy: reclaimPolicy(class),
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: ferryv1alpha1.LabelNodeType, Operator: corev1.NodeSelectorOpIn, Values: []string{ferryv1alpha1.NodeTypeVirtual}},
					{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{string(ref.Cluster)}},
				},
			}}}},
		},
	}
}

// remoteRefOf reads where a remote volume's data is; ok is false for a
// volume that is not remote.
func remoteRefOf(pv *corev1.PersistentVolume) (remoteRef, bool) {
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver != CSIDriver {
		return remoteRef{}, false
	}
	a := csi.VolumeAttributes
	ref := remoteRef{Cluster: ferryv1alpha1.ClusterID(a["cluster"]), Namespace: a["namespace"], Name: a["name"]}
	return ref, ref.Cluster != "" && ref.Namespace != "" && ref.Name != ""
}

// backingClaimOf reads the real claim of a volume bound on a real node; ok
// is false for another volume.
func backingClaimOf(pv *corev1.PersistentVolume) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(pv.Annotations[AnnotationBackingClaim], "/")
	return namespace, name, ok && namespace != "" && name != ""
}

// capacityOf is a claim's reported capacity, its request when none.
func capacityOf(pvc *corev1.PersistentVolumeClaim) resource.Quantity {
	if q, ok := pvc.Status.Capacity[corev1.ResourceStorage]; ok {
		return q
	}
	return pvc.Spec.Resources.Requests[corev1.ResourceStorage]
}
