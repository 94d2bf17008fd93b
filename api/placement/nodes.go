package placement

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// LocalCluster is the location of whatever lives in this cluster rather
// than in a provider: its real nodes, and volumes not held by a provider.
const LocalCluster ferryv1alpha1.ClusterID = ""

// IsVirtualNode says whether node is one of ferry's virtual nodes.
func IsVirtualNode(node *corev1.Node) bool {
	return node.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual
}

// NodeCluster is where a pod placed on node runs: the provider behind a
// virtual node, LocalCluster for a real node.
func NodeCluster(node *corev1.Node) ferryv1alpha1.ClusterID {
	if !IsVirtualNode(node) {
		return LocalCluster
	}
	return ferryv1alpha1.ClusterID(node.Labels[ferryv1alpha1.LabelClusterID])
}

// VolumeCluster is where a PersistentVolume's data lives: the provider
// named by its ferry.io/cluster-id label (the storage fabric sets it on the
// volumes it reflects from a provider), LocalCluster otherwise.
func VolumeCluster(pv *corev1.PersistentVolume) ferryv1alpha1.ClusterID {
	return ferryv1alpha1.ClusterID(pv.Labels[ferryv1alpha1.LabelClusterID])
}

// clusterSelectorPath is where spec.clusterSelector's errors point.
var clusterSelectorPath = field.NewPath("spec", "clusterSelector")

// ClusterSelector picks providers by the labels of their virtual nodes.
type ClusterSelector struct {
	all      bool
	selector *nodeaffinity.NodeSelector
}

// NewClusterSelector parses spec.clusterSelector; nil or without terms
// selects every provider. Errors name the field path, e.g.
// spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[1].values.
func NewClusterSelector(sel *corev1.NodeSelector) (*ClusterSelector, error) {
	if sel == nil || len(sel.NodeSelectorTerms) == 0 {
		return &ClusterSelector{all: true}, nil
	}
	s, err := nodeaffinity.NewNodeSelector(sel, field.WithPath(clusterSelectorPath))
	if err != nil {
		return nil, err
	}
	return &ClusterSelector{selector: s}, nil
}

// Matches says whether the virtual node's provider is selected.
func (s *ClusterSelector) Matches(node *corev1.Node) bool {
	return s.all || s.selector.Match(node)
}

// AllClusters selects every provider.
func AllClusters() *ClusterSelector { return &ClusterSelector{all: true} }

// ToleratesVirtualNodes says whether tolerations admit the NoExecute
// taint every virtual node carries.
func ToleratesVirtualNodes(tolerations []corev1.Toleration) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if t.Key != "" && t.Key != ferryv1alpha1.TaintVirtualNode {
			continue
		}
		// The taint has no value: Exists, or Equal to "".
		if t.Operator == corev1.TolerationOpExists || (t.Key != "" && t.Value == "") {
			return true
		}
	}
	return false
}
