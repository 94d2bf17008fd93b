package peering

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// virtualNodeWant is one virtual node a grant calls for.
type virtualNodeWant struct {
	name      string
	pool      *ferryv1alpha1.VirtualNodePool
	resources corev1.ResourceList
	shapes    []ferryv1alpha1.NodeShape
	labels    map[string]string
}

// wantedVirtualNodes are the virtual nodes standing for a provider: one for
// the whole grant, or, with spec.nodePools, one per granted pool.
func wantedVirtualNodes(fc *ferryv1alpha1.ForeignCluster, slice *ferryv1alpha1.ResourceSlice) []virtualNodeWant {
	np := slice.Spec.NodePools
	if np == nil {
		return []virtualNodeWant{{name: VirtualNodeName(fc.Spec.ClusterID), resources: slice.Status.Resources,
			shapes: slice.Status.NodeShapes, labels: slice.Status.Labels}}
	}
	wants := make([]virtualNodeWant, 0, len(slice.Status.Pools))
	for _, p := range slice.Status.Pools {
		wants = append(wants, virtualNodeWant{
			name:      PoolVirtualNodeName(fc.Spec.ClusterID, np.LabelKey, p.Value),
			pool:      &ferryv1alpha1.VirtualNodePool{LabelKey: np.LabelKey, Value: p.Value},
			resources: p.Resources, shapes: p.NodeShapes, labels: p.Labels,
		})
	}
	return wants
}

const (
	// annotationRetiringSince, on a VirtualNode the grant no longer calls
	// for (its pool is gone, or the peering changed its pools), is when its
	// draining began.
	annotationRetiringSince = "ferry.io/retiring-since"
	// TaintRetiring is the NoExecute taint a retiring virtual node carries:
	// no pod is scheduled there any more.
	TaintRetiring = "ferry.io/retiring"
	// retireTimeout bounds the wait for a retiring node's pods to go: the
	// node is removed then (its pods are left to the pod garbage collector).
	retireTimeout = 2 * time.Minute
)

// retireVirtualNodes drains and removes the provider's VirtualNodes the grant
// no longer calls for: each is tainted and its pods deleted (the virtual
// kubelet, still running, deletes their remote copies first); once none is
// left, or after retireTimeout, it is removed as unpeering removes one.
func (r *PeerReconciler) retireVirtualNodes(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, wants []virtualNodeWant) error {
	ns := fc.Spec.CredentialsSecretRef.Namespace
	var vns ferryv1alpha1.VirtualNodeList
	if err := r.List(ctx, &vns, client.InNamespace(ns), client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(fc.Spec.ClusterID)}); err != nil {
		return fmt.Errorf("list the provider's VirtualNodes: %w", err)
	}
	for i := range vns.Items {
		vn := &vns.Items[i]
		if slices.ContainsFunc(wants, func(w virtualNodeWant) bool { return w.name == vn.Name }) || !metav1.IsControlledBy(vn, fc) {
			continue
		}
		if err := r.retire(ctx, vn); err != nil {
			return err
		}
	}
	return nil
}

func (r *PeerReconciler) retire(ctx context.Context, vn *ferryv1alpha1.VirtualNode) error {
	logger := log.FromContext(ctx).WithValues("virtualNode", vn.Name)
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	since, err := time.Parse(time.RFC3339, vn.Annotations[annotationRetiringSince])
	if err != nil {
		patch := client.MergeFrom(vn.DeepCopy())
		metav1.SetMetaDataAnnotation(&vn.ObjectMeta, annotationRetiringSince, now.UTC().Format(time.RFC3339))
		vn.Spec.Taints = append(withoutRetiringTaint(vn.Spec.Taints), corev1.Taint{Key: TaintRetiring, Effect: corev1.TaintEffectNoExecute})
		if err := r.Patch(ctx, vn, patch); err != nil {
			return fmt.Errorf("mark VirtualNode %s retiring: %w", vn.Name, err)
		}
		logger.Info("Retiring a virtual node the grant no longer calls for: draining its pods")
		since = now
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return fmt.Errorf("list pods to drain from %s: %w", vn.Node(), err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != vn.Node() {
			continue
		}
		left++
		if p.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("drain pod %s/%s from %s: %w", p.Namespace, p.Name, vn.Node(), err)
			}
			logger.Info("Draining pod of a retiring virtual node", "pod", client.ObjectKeyFromObject(p))
		}
	}
	if left > 0 && now.Sub(since) < retireTimeout {
		return nil
	}
	if left > 0 {
		logger.Info("Removing a retiring virtual node with pods left", "pods", left, "waited", now.Sub(since).String())
	}
	if err := r.removeVirtualNode(ctx, types.NamespacedName{Namespace: vn.Namespace, Name: vn.Name}); err != nil {
		return err
	}
	logger.Info("Removed a retired virtual node")
	return nil
}

// withoutRetiringTaint is taints without TaintRetiring.
func withoutRetiringTaint(taints []corev1.Taint) []corev1.Taint {
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == TaintRetiring })
	if len(out) == 0 {
		return nil
	}
	return out
}

// VirtualNodesOf lists the Node names of a provider's virtual nodes in this
// cluster: the one standing for the whole provider and one per pool.
func VirtualNodesOf(ctx context.Context, c client.Reader, provider ferryv1alpha1.ClusterID) (map[string]bool, error) {
	var vns ferryv1alpha1.VirtualNodeList
	if err := c.List(ctx, &vns, client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(provider)}); err != nil {
		return nil, fmt.Errorf("list the VirtualNodes of %s: %w", provider, err)
	}
	names := map[string]bool{VirtualNodeName(provider): true}
	for i := range vns.Items {
		if vns.Items[i].Spec.ClusterID == provider {
			names[vns.Items[i].Node()] = true
		}
	}
	return names, nil
}

// virtualNodesCondition sums up the readiness of a provider's virtual
// nodes: Ready when all are; otherwise the first not Ready, by name.
func virtualNodesCondition(vns []ferryv1alpha1.VirtualNode) (metav1.ConditionStatus, string, string) {
	slices.SortFunc(vns, func(a, b ferryv1alpha1.VirtualNode) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	for i := range vns {
		ready := meta.FindStatusCondition(vns[i].Status.Conditions, ferryv1alpha1.VirtualNodeNodeReady)
		if ready == nil {
			return metav1.ConditionFalse, "Starting", fmt.Sprintf("the virtual kubelet of %s has not reported yet", vns[i].Name)
		}
		if ready.Status != metav1.ConditionTrue {
			msg := ready.Message
			if len(vns) > 1 {
				msg = vns[i].Name + ": " + msg
			}
			return ready.Status, ready.Reason, msg
		}
	}
	if len(vns) == 1 {
		ready := meta.FindStatusCondition(vns[0].Status.Conditions, ferryv1alpha1.VirtualNodeNodeReady)
		return ready.Status, ready.Reason, ready.Message
	}
	return metav1.ConditionTrue, "Ready", fmt.Sprintf("all %d virtual nodes (node pools) are Ready", len(vns))
}
