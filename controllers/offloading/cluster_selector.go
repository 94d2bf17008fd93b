package offloading

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// forbiddenNamespaces hold the control plane and ferry itself: offloading
// them would hand a provider the cluster's own machinery.
var forbiddenNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease, ferryv1alpha1.SystemNamespace}

// ValidateNamespace refuses the namespaces that may never be offloaded,
// naming the namespace.
func ValidateNamespace(namespace string) error {
	if slices.Contains(forbiddenNamespaces, namespace) {
		return fmt.Errorf("namespace %s may not be offloaded (%v are the cluster's and ferry's own)", namespace, forbiddenNamespaces)
	}
	return nil
}

// selectedClusters returns the providers whose virtual node sel matches,
// sorted: virtual nodes are told by the ferry.io/type label and name their
// provider in ferry.io/cluster-id; the consumer itself is never a provider.
func selectedClusters(nodes []corev1.Node, sel *placement.ClusterSelector, self ferryv1alpha1.ClusterID) []ferryv1alpha1.ClusterID {
	var out []ferryv1alpha1.ClusterID
	for i := range nodes {
		n := &nodes[i]
		id := ferryv1alpha1.ClusterID(n.Labels[ferryv1alpha1.LabelClusterID])
		if n.Labels[ferryv1alpha1.LabelNodeType] != ferryv1alpha1.NodeTypeVirtual || id == "" || id == self || !n.DeletionTimestamp.IsZero() {
			continue
		}
		if sel.Matches(n) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
