// Package nodetopology labels this cluster's real nodes with
// topology.ferry.io/cluster=<this cluster's ClusterID>, the topology key
// virtual nodes carry with their provider's ClusterID, so that
// topologySpreadConstraints and pod (anti-)affinity on that key count this
// cluster as one domain beside each provider. Without the label on real
// nodes, kube-scheduler's PodTopologySpread would leave them out of every
// domain and, for a hard constraint, refuse them. Virtual nodes are left to
// their virtual kubelets. A node is patched only when its label is missing
// or wrong: nothing is written at rest.
package nodetopology

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch

// Reconciler keeps the cluster topology label on real nodes.
type Reconciler struct {
	client.Client
	// ClusterID is this cluster's, the label's value on its real nodes.
	ClusterID ferryv1alpha1.ClusterID
}

// needsLabel says whether node is a real node whose topology label is not
// ClusterID.
func (r *Reconciler) needsLabel(node *corev1.Node) bool {
	return !placement.IsVirtualNode(node) && node.Labels[ferryv1alpha1.LabelTopologyCluster] != string(r.ClusterID)
}

// Reconcile labels one node when it needs it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	if err := r.Get(ctx, req.NamespacedName, &node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() || !r.needsLabel(&node) {
		return ctrl.Result{}, nil
	}
	// A merge patch of the one label, guarded by the resourceVersion read:
	// the node's other labels, and a concurrent change, are left alone.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": node.ResourceVersion,
		"labels":          map[string]string{ferryv1alpha1.LabelTopologyCluster: string(r.ClusterID)},
	}})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("encode label patch of node %s: %w", node.Name, err)
	}
	if err := r.Patch(ctx, &node, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return ctrl.Result{}, fmt.Errorf("label node %s %s=%s: %w", node.Name, ferryv1alpha1.LabelTopologyCluster, r.ClusterID, err)
	}
	log.FromContext(ctx).Info("Labelled node with its cluster", "node", node.Name, "label", ferryv1alpha1.LabelTopologyCluster, "cluster", r.ClusterID)
	return ctrl.Result{}, nil
}

// SetupWithManager watches nodes; only events of real nodes whose label is
// missing or wrong reach Reconcile, so heartbeats cost no reconcile.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := ferryv1alpha1.ValidateClusterID("cluster ID", string(r.ClusterID)); err != nil {
		return fmt.Errorf("node topology controller: %w", err)
	}
	needs := func(o client.Object) bool {
		n, ok := o.(*corev1.Node)
		return ok && r.needsLabel(n)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodetopology").
		For(&corev1.Node{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(e event.CreateEvent) bool { return needs(e.Object) },
			UpdateFunc:  func(e event.UpdateEvent) bool { return needs(e.ObjectNew) },
			DeleteFunc:  func(event.DeleteEvent) bool { return false },
			GenericFunc: func(e event.GenericEvent) bool { return needs(e.Object) },
		})).
		Complete(r)
}
