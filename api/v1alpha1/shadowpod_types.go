package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationPodLost is set on a ShadowPod by the consumer's virtual kubelet
// when the real pod it had reported is gone while the ShadowPod stays: the
// provider's controller then counts the next pod as a recreation even if it
// did not see this one go (it was not running). Its value is "true".
const AnnotationPodLost = "ferry.io/pod-lost"

// ShadowPod condition types.
const (
	// ShadowPodCreated: the real pod exists. Absent while the first pod
	// runs untroubled (its creation costs no status write); False with the
	// provider's reason when it could not be created (or was stopped);
	// True once a pod exists after that, or was recreated.
	ShadowPodCreated = "PodCreated"
	// ShadowPodResizeRefused: the provider refused to resize the real pod
	// in place to the template's container resources (True, with its
	// reason); absent while there is no refusal to report.
	ShadowPodResizeRefused = "PodResizeRefused"
)

// PodMetadata is the part of a pod's metadata a consumer may set.
type PodMetadata struct {
	// Labels of the real pod.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations of the real pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ShadowPodTemplate is the pod a ShadowPod keeps alive.
type ShadowPodTemplate struct {
	// Metadata of the real pod.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`

	// Spec of the real pod, already translated for the provider (no node
	// name, service accounts and volumes renamed to their reflected copies).
	Spec corev1.PodSpec `json:"spec"`
}

// ShadowPodSpec is the pod a consumer wants run in a twin namespace.
type ShadowPodSpec struct {
	// ConsumerClusterID is the ClusterID of the consumer the pod belongs to.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="consumerClusterID is immutable"
	ConsumerClusterID ClusterID `json:"consumerClusterID"`

	// Template is the wanted pod.
	Template ShadowPodTemplate `json:"template"`
}

// ShadowPodStatus is the real pod as seen by the provider's controller.
type ShadowPodStatus struct {
	// Conditions: PodCreated.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// PodName is the real pod's name, once the status is written while or
	// after a pod existed (a recreation, an end, a refusal after a pod): the
	// durable record that there was a pod. Empty while the first pod runs
	// untroubled; the real pod, of the ShadowPod's name, is the record then.
	// +optional
	PodName string `json:"podName,omitempty"`

	// Phase is the real pod's phase once it ended, Succeeded or Failed, and
	// empty while it waits or runs: the provider writes a ShadowPod's status
	// only on what its readers act on (ended, recreated, refused), never on
	// the way to Running. The real pod has the live phase.
	// +optional
	Phase corev1.PodPhase `json:"phase,omitempty"`

	// Recreations counts the real pods recreated after someone deleted one;
	// they add to the restart counts the consumer sees.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Recreations int32 `json:"recreations,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ShadowPod is, in a provider's twin namespace, the pod a consumer offloaded.
// The provider keeps exactly one real pod for it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=spod,categories=ferry
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerClusterID`
// +kubebuilder:printcolumn:name="Ended",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Recreations",type=integer,JSONPath=`.status.recreations`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShadowPod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the wanted pod.
	Spec ShadowPodSpec `json:"spec"`

	// Status is the real pod.
	// +optional
	Status ShadowPodStatus `json:"status,omitempty"`
}

// ShadowPodList is a list of ShadowPods.
// +kubebuilder:object:root=true
type ShadowPodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ShadowPods.
	Items []ShadowPod `json:"items"`
}

func init() {
	register(&ShadowPod{}, &ShadowPodList{})
}
