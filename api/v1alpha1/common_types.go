package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// ClusterID names a cluster among its peers. It is chosen once, at install
// time, and is used in labels, namespace names and credentials, so it must be
// a DNS-1123 label.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type ClusterID string

// NodeShape is the free capacity of a group of identical real nodes of a
// provider. The RemoteFit scheduler plugin uses it to refuse a pod that the
// virtual node's total could hold but no single remote node could.
type NodeShape struct {
	// Resources is what is still unrequested on each node of the group
	// (cpu, memory, pods and extended resources).
	// +kubebuilder:validation:XValidation:rule="size(self) > 0",message="resources must name at least one resource"
	Resources corev1.ResourceList `json:"resources"`

	// Count is how many real nodes have at least these free resources.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
}

// Condition types shared by several kinds. Each kind documents which it sets.
const (
	// ConditionReady says the object is fully in effect.
	ConditionReady = "Ready"
)
