package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualNode condition types.
const (
	// VirtualNodeKubeletRunning: the virtual kubelet serving this node runs.
	VirtualNodeKubeletRunning = "VirtualKubeletRunning"
	// VirtualNodeNodeReady mirrors the Ready condition of the Node it registered.
	VirtualNodeNodeReady = "NodeReady"
)

// VirtualNodeSpec is the node a provider appears as in this cluster.
type VirtualNodeSpec struct {
	// ClusterID of the provider behind the node.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterID is immutable"
	ClusterID ClusterID `json:"clusterID"`

	// NodeName is the Node's name; the VirtualNode's own name when empty.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeName is immutable"
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// Resources are the node's capacity and allocatable: the provider's grant.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// NodeShapes is the grant's summary of free real nodes, published on the
	// Node for the RemoteFit scheduler plugin.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	NodeShapes []NodeShape `json:"nodeShapes,omitempty"`

	// Labels added to the Node besides ferry's own.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Taints added to the Node besides ferry's NoExecute virtual-node taint.
	// +listType=atomic
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// StorageClasses are the classes claims of ferry's virtual storage class
	// may ask for on this node: the provider's offers, under this cluster's
	// names (ForeignCluster spec.storageClassMap). Published on the Node.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	StorageClasses []VirtualNodeStorageClass `json:"storageClasses,omitempty"`

	// KubeconfigSecretRef names the Secret, in this namespace, with the
	// credential the virtual kubelet uses to reach the provider.
	KubeconfigSecretRef corev1.LocalObjectReference `json:"kubeconfigSecretRef"`

	// Pool is the pool of the provider's nodes this node stands for; unset,
	// all of them.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="pool is immutable"
	// +optional
	Pool *VirtualNodePool `json:"pool,omitempty"`
}

// VirtualNodeStorageClass is a storage class a provider serves claims with,
// as this cluster names it.
type VirtualNodeStorageClass struct {
	// Name of the class in this cluster (what a claim asks for); "" stands
	// for this cluster's default class, served by the provider's default.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// ProviderClass is the provider's StorageClass that serves it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ProviderClass string `json:"providerClass"`
}

// VirtualNodeStatus is what the virtual kubelet reports.
type VirtualNodeStatus struct {
	// Conditions: VirtualKubeletRunning, NodeReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// NodeName is the Node the virtual kubelet registered.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualNode asks for one virtual node standing for a provider, served by
// one virtual kubelet.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vn,categories=ferry
// +kubebuilder:printcolumn:name="Cluster ID",type=string,JSONPath=`.spec.clusterID`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.nodeName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="NodeReady")].status`
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=`.spec.resources.cpu`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.spec.resources.memory`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the wanted node.
	Spec VirtualNodeSpec `json:"spec"`

	// Status is the node as served.
	// +optional
	Status VirtualNodeStatus `json:"status,omitempty"`
}

// VirtualNodeList is a list of VirtualNodes.
// +kubebuilder:object:root=true
type VirtualNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the VirtualNodes.
	Items []VirtualNode `json:"items"`
}

func init() {
	register(&VirtualNode{}, &VirtualNodeList{})
}

// Node is the name of the Node standing for the VirtualNode:
// spec.nodeName, or the VirtualNode's own name when that is empty.
func (vn *VirtualNode) Node() string {
	if vn.Spec.NodeName != "" {
		return vn.Spec.NodeName
	}
	return vn.Name
}
