package v1alpha1

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NodePools splits a provider's nodes into pools by a node label: one
// virtual node per value the label takes among the provider's nodes, each
// sized from its own pool's schedulable nodes and labelled <labelKey>=<value>,
// so pods select a pool with a plain nodeSelector. Nodes without the label
// are not offered.
type NodePools struct {
	// LabelKey is the provider's node label whose values name the pools,
	// e.g. gpu-model or node.kubernetes.io/instance-type.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	LabelKey string `json:"labelKey"`
}

// LabelOriginNode is, on a ShadowPod, the consumer's virtual node its pod
// is bound to (when the name fits a label value): the virtual kubelets of a
// provider's several pools each handle their own ShadowPods only.
const LabelOriginNode = "ferry.io/origin-node"

// MaxNodePools bounds the pools a provider grants one consumer (the
// virtual nodes it gets): further pools, the last by value, are left out
// and named in the Granted condition.
const MaxNodePools = 32

// NodePoolGrant is what a provider grants a consumer in one pool of its
// nodes: the capacity, node shapes and labels of one virtual node.
type NodePoolGrant struct {
	// Value of the pool label shared by the pool's nodes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value"`

	// Nodes is how many schedulable nodes the pool has (0 while all its
	// nodes are NotReady, cordoned or tainted: the pool stays, granted
	// nothing).
	// +kubebuilder:validation:Minimum=0
	Nodes int32 `json:"nodes"`

	// Resources granted in this pool: its virtual node's capacity.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`

	// NodeShapes summarizes the pool's largest free nodes, biggest first.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	NodeShapes []NodeShape `json:"nodeShapes,omitempty"`

	// Labels the provider suggests for the pool's virtual node, the pool
	// label <labelKey>=<value> among them.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// VirtualNodePool is the pool of provider nodes a virtual node stands for:
// its remote pods are sent there with the nodeSelector <labelKey>=<value>.
type VirtualNodePool struct {
	// LabelKey is the provider's node label the pools are split by.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$`
	LabelKey string `json:"labelKey"`

	// Value is this pool's value of the label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value"`
}

// ValidateNodePoolLabelKey says why key cannot split a provider's nodes into
// pools (it must be a qualified label key, as a nodeSelector's keys are),
// naming field.
func ValidateNodePoolLabelKey(field, key string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, key, errs[0])
	}
	return nil
}
