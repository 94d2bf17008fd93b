package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PeeringQuota condition types.
const (
	// PeeringQuotaExceeded: the consumer's pods use all of a limited resource.
	PeeringQuotaExceeded = "Exceeded"
)

// PeeringQuotaSpec is what one consumer may run in this provider.
type PeeringQuotaSpec struct {
	// ConsumerClusterID is the consumer the quota applies to.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="consumerClusterID is immutable"
	ConsumerClusterID ClusterID `json:"consumerClusterID"`

	// Limits caps the sum of the requests of the consumer's non-terminal pods
	// (init containers as their maximum, pod overhead included). A resource
	// not listed is not limited.
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="limits must name at least one resource"
	Limits corev1.ResourceList `json:"limits"`
}

// PeeringQuotaStatus is what the consumer uses now.
type PeeringQuotaStatus struct {
	// Conditions: Exceeded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Used is the sum of the requests of the consumer's non-terminal pods,
	// for the resources in spec.limits.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`

	// Reservations are ShadowPods the webhook admitted that Used does not
	// count yet: admission adds one with an optimistic-concurrency update, so
	// two webhook replicas admitting at once cannot both spend the same room;
	// the quota controller folds a reservation into Used once it sees the
	// ShadowPod, and drops it when the ShadowPod never appeared.
	// +listType=map
	// +listMapKey=uid
	// +optional
	Reservations []QuotaReservation `json:"reservations,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// QuotaReservation is one admitted ShadowPod's requests, charged to the
// quota until its ShadowPod is counted in Used.
type QuotaReservation struct {
	// UID of the ShadowPod (assigned before admission).
	UID types.UID `json:"uid"`

	// Namespace and Name of the ShadowPod.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`

	// Requests charged, for the resources in spec.limits: all the
	// ShadowPod requests for a create; for an update that raises them, the
	// increase over what status.used already counts.
	Requests corev1.ResourceList `json:"requests"`

	// Generation of the ShadowPod the reservation was made for: it is
	// folded into status.used once the ShadowPod is seen at this generation
	// or a later one.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// Time the reservation was made.
	Time metav1.Time `json:"time"`
}

// PeeringQuota bounds what a consumer may run in this provider; the ShadowPod
// validating webhook enforces it with exact quantity arithmetic.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pquota,categories=ferry
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerClusterID`
// +kubebuilder:printcolumn:name="CPU Limit",type=string,JSONPath=`.spec.limits.cpu`
// +kubebuilder:printcolumn:name="CPU Used",type=string,JSONPath=`.status.used.cpu`
// +kubebuilder:printcolumn:name="Memory Limit",type=string,JSONPath=`.spec.limits.memory`
// +kubebuilder:printcolumn:name="Memory Used",type=string,JSONPath=`.status.used.memory`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PeeringQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the quota.
	Spec PeeringQuotaSpec `json:"spec"`

	// Status is the usage.
	// +optional
	Status PeeringQuotaStatus `json:"status,omitempty"`
}

// PeeringQuotaList is a list of PeeringQuotas.
// +kubebuilder:object:root=true
type PeeringQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the PeeringQuotas.
	Items []PeeringQuota `json:"items"`
}

func init() {
	register(&PeeringQuota{}, &PeeringQuotaList{})
}
