package gateway

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// AgentReconciler is the route agent of one node: it points the node's
// routes for every peer range the gateway tunnels to at the gateway pod,
// over a VXLAN link, and removes them (and the link) when there is no peer
// or no gateway.
type AgentReconciler struct {
	client.Client
	// ClusterID of this cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Node installs the routes.
	Node *NodePlane
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs,verbs=get;list;watch

// Reconcile makes the node's overlay and routes match the gateway's plan.
func (r *AgentReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	var local ferryv1alpha1.NetworkConfig
	if err := r.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: string(r.ClusterID)}, &local); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.Node.Teardown()
		}
		return ctrl.Result{}, err
	}
	gw := local.Status.Gateway
	if gw == nil {
		return ctrl.Result{}, r.Node.Teardown()
	}
	addr, err := netip.ParseAddr(gw.OverlayAddress)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("NetworkConfig %s: status.gateway.overlayAddress %q: not an IP address", local.Name, gw.OverlayAddress)
	}
	var list ferryv1alpha1.NetworkConfigList
	if err := r.List(ctx, &list, client.MatchingLabels{ferryv1alpha1.LabelNetworkConfig: ferryv1alpha1.NetworkConfigPeer}); err != nil {
		return ctrl.Result{}, err
	}
	plan, _, err := FromNetworkConfigs(&local, list.Items, r.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Node.VXLANPort, r.Node.VNI = int(gw.VXLANPort), int(gw.VNI)
	ranges := plan.Ranges()
	if err := r.Node.Apply(addr, ranges, int(gw.MTU)); err != nil {
		return ctrl.Result{}, fmt.Errorf("route peers' ranges to the gateway: %w", err)
	}
	log.FromContext(ctx).V(1).Info("Routes in place", "gateway", addr, "ranges", describeRanges(ranges))
	return ctrl.Result{RequeueAfter: time.Minute}, nil
}

// SetupWithManager registers the route agent, and its readiness check
// "reconcile": not ready while its last reconcile failed.
func (r *AgentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	rec, err := withReadiness(mgr, r)
	if err != nil {
		return err
	}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{request} })
	return ctrl.NewControllerManagedBy(mgr).
		Named("route-agent").
		WatchesRawSource(startNow()).
		Watches(&ferryv1alpha1.NetworkConfig{}, all).
		Complete(rec)
}
