package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceOffloadingName is the only name a NamespaceOffloading may have, so
// that a namespace has at most one, without a race between two creations.
const NamespaceOffloadingName = "offloading"

// PodOffloadingStrategy says where the pods of an offloaded namespace may run.
// +kubebuilder:validation:Enum=Local;Remote;LocalAndRemote
type PodOffloadingStrategy string

const (
	// PodOffloadingLocal: only on this cluster's real nodes.
	PodOffloadingLocal PodOffloadingStrategy = "Local"
	// PodOffloadingRemote: only on the virtual nodes of the selected clusters.
	PodOffloadingRemote PodOffloadingStrategy = "Remote"
	// PodOffloadingLocalAndRemote: on real nodes or the selected virtual nodes.
	PodOffloadingLocalAndRemote PodOffloadingStrategy = "LocalAndRemote"
)

// NamespaceMappingStrategy says how the twin namespace in a provider is named.
// +kubebuilder:validation:Enum=DefaultName;EnforceSameName;SelectedName
type NamespaceMappingStrategy string

const (
	// NamespaceMappingDefaultName derives a unique, length-safe name from the
	// namespace and this cluster's ClusterID.
	NamespaceMappingDefaultName NamespaceMappingStrategy = "DefaultName"
	// NamespaceMappingEnforceSameName uses the namespace's own name, and fails
	// rather than adopt a namespace the provider already has.
	NamespaceMappingEnforceSameName NamespaceMappingStrategy = "EnforceSameName"
	// NamespaceMappingSelectedName uses spec.remoteNamespaceName.
	NamespaceMappingSelectedName NamespaceMappingStrategy = "SelectedName"
)

// OffloadingPhase is where the twin namespace in one provider stands.
// +kubebuilder:validation:Enum=Pending;Ready;Failed;Terminating
type OffloadingPhase string

const (
	// OffloadingPending: the twin namespace is asked for, not yet there.
	OffloadingPending OffloadingPhase = "Pending"
	// OffloadingReady: the twin namespace exists and the consumer may use it.
	OffloadingReady OffloadingPhase = "Ready"
	// OffloadingFailed: the twin namespace could not be made; see conditions.
	OffloadingFailed OffloadingPhase = "Failed"
	// OffloadingTerminating: pods are drained and the twin namespace deleted.
	OffloadingTerminating OffloadingPhase = "Terminating"
)

// NamespaceOffloading condition types.
const (
	// NamespaceOffloadingReady: every selected cluster has a Ready twin namespace.
	NamespaceOffloadingReady = ConditionReady
	// NamespaceOffloadingClustersSelected: at least one cluster matches the selector.
	NamespaceOffloadingClustersSelected = "ClustersSelected"
)

// NamespaceOffloadingSpec says where a namespace's pods may run and how its
// twin namespaces are named.
// +kubebuilder:validation:XValidation:rule="self.namespaceMappingStrategy != 'SelectedName' || has(self.remoteNamespaceName)",message="remoteNamespaceName is required when namespaceMappingStrategy is SelectedName",fieldPath=`.remoteNamespaceName`
// +kubebuilder:validation:XValidation:rule="!has(self.remoteNamespaceName) || self.namespaceMappingStrategy == 'SelectedName'",message="remoteNamespaceName may only be set when namespaceMappingStrategy is SelectedName",fieldPath=`.remoteNamespaceName`
// +kubebuilder:validation:XValidation:rule="!has(self.placementPreference) || self.placementPreference == 'None' || !has(self.podOffloadingStrategy) || self.podOffloadingStrategy == 'LocalAndRemote'",message="placementPreference LocalFirst or RemoteFirst needs podOffloadingStrategy LocalAndRemote",fieldPath=`.placementPreference`
type NamespaceOffloadingSpec struct {
	// NamespaceMappingStrategy: DefaultName, EnforceSameName or SelectedName.
	// +kubebuilder:default=DefaultName
	// +optional
	NamespaceMappingStrategy NamespaceMappingStrategy `json:"namespaceMappingStrategy,omitempty"`

	// RemoteNamespaceName is the twin namespace's name with SelectedName.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	RemoteNamespaceName string `json:"remoteNamespaceName,omitempty"`

	// PodOffloadingStrategy: Local, Remote or LocalAndRemote.
	// +kubebuilder:default=LocalAndRemote
	// +optional
	PodOffloadingStrategy PodOffloadingStrategy `json:"podOffloadingStrategy,omitempty"`

	// ClusterSelector picks the providers, matched against the labels of their
	// virtual nodes. Empty selects every peered provider.
	// +optional
	ClusterSelector *corev1.NodeSelector `json:"clusterSelector,omitempty"`

	// SchedulerName, when set, is the scheduler ferry's pod webhook gives the
	// namespace's pods that may run remotely (those not placed Local), e.g.
	// ferry-scheduler; a pod that names a scheduler of its own keeps it.
	// Empty leaves pods to the scheduler they ask for.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`

	// PlacementPreference, with LocalAndRemote: None, LocalFirst or RemoteFirst.
	// +kubebuilder:default=None
	// +optional
	PlacementPreference PlacementPreference `json:"placementPreference,omitempty"`
}

// ClusterOffloadingStatus is the twin namespace in one provider.
type ClusterOffloadingStatus struct {
	// ClusterID of the provider.
	ClusterID ClusterID `json:"clusterID"`

	// TwinNamespace is the namespace's name in the provider.
	// +optional
	TwinNamespace string `json:"twinNamespace,omitempty"`

	// Phase of the twin namespace.
	Phase OffloadingPhase `json:"phase"`

	// Conditions explain the phase.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NamespaceOffloadingStatus is where the namespace is offloaded.
type NamespaceOffloadingStatus struct {
	// Conditions: Ready, ClustersSelected.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Clusters lists every selected provider and its twin namespace.
	// +listType=map
	// +listMapKey=clusterID
	// +optional
	Clusters []ClusterOffloadingStatus `json:"clusters,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// NamespaceOffloading extends its namespace to the selected providers: they
// get a twin namespace, and the namespace's pods may run there.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nsoff,categories=ferry
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'offloading'",message="metadata.name must be 'offloading': one NamespaceOffloading per namespace"
// +kubebuilder:printcolumn:name="Pods",type=string,JSONPath=`.spec.podOffloadingStrategy`
// +kubebuilder:printcolumn:name="Preference",type=string,JSONPath=`.spec.placementPreference`
// +kubebuilder:printcolumn:name="Mapping",type=string,JSONPath=`.spec.namespaceMappingStrategy`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NamespaceOffloading struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the wanted offloading.
	Spec NamespaceOffloadingSpec `json:"spec,omitempty"`

	// Status is the offloading as done.
	// +optional
	Status NamespaceOffloadingStatus `json:"status,omitempty"`
}

// NamespaceOffloadingList is a list of NamespaceOffloadings.
// +kubebuilder:object:root=true
type NamespaceOffloadingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the NamespaceOffloadings.
	Items []NamespaceOffloading `json:"items"`
}

func init() {
	register(&NamespaceOffloading{}, &NamespaceOffloadingList{})
}
