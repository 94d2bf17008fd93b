package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TwinNamespace condition types.
const (
	// TwinNamespaceReady: the twin namespace exists, belongs to this consumer
	// and the consumer's RoleBinding in it is in place. False with a reason
	// (NamespaceConflict, ReservedName) when the provider refuses.
	TwinNamespaceReady = ConditionReady
)

// TwinNamespaceSpec is a consumer's request for a twin namespace.
type TwinNamespaceSpec struct {
	// ConsumerClusterID is the ClusterID of the consumer asking; it must be
	// the consumer the tenant namespace belongs to.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="consumerClusterID is immutable"
	ConsumerClusterID ClusterID `json:"consumerClusterID"`

	// ConsumerNamespace is the consumer's namespace the twin stands for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="consumerNamespace is immutable"
	ConsumerNamespace string `json:"consumerNamespace"`
}

// TwinNamespaceStatus is the provider's answer.
type TwinNamespaceStatus struct {
	// Phase of the twin namespace: Pending, Ready, Failed or Terminating.
	// +optional
	Phase OffloadingPhase `json:"phase,omitempty"`

	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// TwinNamespace is, in a consumer's tenant namespace on a provider, the
// consumer's request for one twin namespace, named like this object. The
// provider creates the namespace (never adopting one it did not create for
// this consumer) with a RoleBinding for the consumer, and deletes both when
// the request goes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=twinns,categories=ferry
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name is the twin namespace's name: at most 63 characters"
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerClusterID`
// +kubebuilder:printcolumn:name="Consumer Namespace",type=string,JSONPath=`.spec.consumerNamespace`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TwinNamespace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the request.
	Spec TwinNamespaceSpec `json:"spec"`

	// Status is the provider's answer.
	// +optional
	Status TwinNamespaceStatus `json:"status,omitempty"`
}

// TwinNamespaceList is a list of TwinNamespaces.
// +kubebuilder:object:root=true
type TwinNamespaceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the TwinNamespaces.
	Items []TwinNamespace `json:"items"`
}

func init() {
	register(&TwinNamespace{}, &TwinNamespaceList{})
}
