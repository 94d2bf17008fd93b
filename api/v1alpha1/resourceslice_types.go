package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSlice condition types.
const (
	// ResourceSliceGranted: the provider decided on the request; its status
	// says what was granted. False with a reason when the provider refused.
	ResourceSliceGranted = "Granted"
)

// ResourceSliceSpec is what a consumer asks of a provider.
type ResourceSliceSpec struct {
	// ConsumerClusterID is the ClusterID of the consumer asking.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="consumerClusterID is immutable"
	ConsumerClusterID ClusterID `json:"consumerClusterID"`

	// Resources is a fixed request, granted up to what the provider has free.
	// Left empty, the provider grants by its own policy (by default a share of
	// its unrequested resources, following them as they change).
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// NodePools asks for one grant per pool of the provider's nodes
	// (status.pools) instead of one for all of them.
	// +optional
	NodePools *NodePools `json:"nodePools,omitempty"`
}

// StorageClassOffer is a storage class the provider lets consumers use.
type StorageClassOffer struct {
	// Name of the provider's StorageClass.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Default marks the class the provider uses when a consumer asks for none.
	// +optional
	Default bool `json:"default,omitempty"`
}

// ResourceSliceStatus is what the provider granted.
type ResourceSliceStatus struct {
	// Conditions: Granted.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Resources granted: the capacity of the consumer's virtual node.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// NodeShapes summarizes the largest free real nodes, biggest first.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	NodeShapes []NodeShape `json:"nodeShapes,omitempty"`

	// Labels the provider suggests for the virtual node (region, zone, provider).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// StorageClasses the consumer's offloaded volumes may use.
	// +listType=map
	// +listMapKey=name
	// +optional
	StorageClasses []StorageClassOffer `json:"storageClasses,omitempty"`

	// Pools is, when spec.nodePools is set, the grant in each pool, by
	// value; resources above is then the pools' sum, and nodeShapes empty.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=value
	// +optional
	Pools []NodePoolGrant `json:"pools,omitempty"`

	// ObservedGeneration is the generation the grant was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ResourceSlice is a consumer's request for resources in a provider's tenant
// namespace, and, in its status, the provider's grant.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rslice,categories=ferry
// +kubebuilder:printcolumn:name="Consumer",type=string,JSONPath=`.spec.consumerClusterID`
// +kubebuilder:printcolumn:name="Granted",type=string,JSONPath=`.status.conditions[?(@.type=="Granted")].status`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.status.resources.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.resources.memory`
// +kubebuilder:printcolumn:name="Pods",type=string,JSONPath=`.status.resources.pods`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the consumer's request.
	Spec ResourceSliceSpec `json:"spec"`

	// Status is the provider's grant.
	// +optional
	Status ResourceSliceStatus `json:"status,omitempty"`
}

// ResourceSliceList is a list of ResourceSlices.
// +kubebuilder:object:root=true
type ResourceSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ResourceSlices.
	Items []ResourceSlice `json:"items"`
}

func init() {
	register(&ResourceSlice{}, &ResourceSliceList{})
}
