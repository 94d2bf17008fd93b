package fabric

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Providers reaches a provider with the peering's credential.
type Providers interface {
	// For returns a client of the provider fc stands for, and this
	// cluster's tenant namespace there.
	For(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) (client.Client, string, error)
}

// ExchangeReconciler swaps NetworkConfigs with each peer, over the
// credential the peering already uses (the consumer's, in its tenant
// namespace on the provider), and reports the ForeignCluster condition
// NetworkReady:
//   - as a consumer, it writes this cluster's NetworkConfig into its tenant
//     namespace on the provider (the provider maps it and writes status
//     there), copies the provider's published NetworkConfig into
//     ferry-system/<provider> (which this cluster's IPAM maps), and copies
//     back where the provider put this cluster (status.podCIDRAtPeer,
//     apiServerAddressAtPeer);
//   - as a provider, it publishes this cluster's NetworkConfig into each
//     consumer's tenant namespace.
//
// Unpeering deletes the copies; the IPAM then releases their ranges.
type ExchangeReconciler struct {
	client.Client
	// ClusterID of this cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Disabled: the fabric is off; only NetworkReady is reported.
	Disabled bool
	// Providers hands out provider clients.
	Providers Providers
	// TenantNamespace is a consumer's tenant namespace on this cluster.
	TenantNamespace func(*ferryv1alpha1.ForeignCluster) string
}

// Polling of the provider's side (its status is not watched remotely).
const (
	pollPending = 2 * time.Second
	pollSettled = time.Minute
)

// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters/status,verbs=get;update;patch

// Reconcile exchanges NetworkConfigs with one peer.
func (r *ExchangeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc ferryv1alpha1.ForeignCluster
	if err := r.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	live := fc.DeletionTimestamp.IsZero()
	if !live || !fc.Spec.IsProvider() || r.Disabled {
		// The copy sent to the provider goes with the peering only (the
		// provider deletes it with the tenant namespace anyway).
		if err := r.forgetProvider(ctx, &fc, live || !fc.Spec.IsProvider()); err != nil {
			return ctrl.Result{}, err
		}
	}
	if !live {
		return ctrl.Result{}, nil
	}
	ready := metav1.Condition{Type: ferryv1alpha1.ForeignClusterNetworkReady, Status: metav1.ConditionFalse}
	if r.Disabled {
		ready.Reason = "NetworkingDisabled"
		ready.Message = "ferry's network fabric is disabled (--disable-network): pod addresses pass unchanged, so the clusters' networks must already reach each other"
		return afterReady(ctrl.Result{}, r.setReady(ctx, &fc, ready))
	}
	var local ferryv1alpha1.NetworkConfig
	if err := r.Get(ctx, types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: string(r.ClusterID)}, &local); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("read local NetworkConfig: %w", err)
		}
		ready.Reason = "LocalNetworkUnknown"
		ready.Message = fmt.Sprintf("this cluster's NetworkConfig %s/%s does not exist yet: its pod CIDR is unknown until set with --pod-cidr or detected from the nodes' spec.podCIDRs", ferryv1alpha1.SystemNamespace, r.ClusterID)
		return afterReady(ctrl.Result{RequeueAfter: pollPending}, r.setReady(ctx, &fc, ready))
	}

	var parts []string
	var peerConfigs []*ferryv1alpha1.NetworkConfig
	pending := false
	if fc.Spec.IsConsumer() {
		msg, nc, err := r.publish(ctx, &fc, &local)
		if err != nil {
			return ctrl.Result{}, err
		}
		parts, pending = append(parts, msg), pending || nc == nil
		peerConfigs = append(peerConfigs, nc)
	}
	if fc.Spec.IsProvider() {
		msg, nc, err := r.exchangeWithProvider(ctx, &fc, &local)
		if err != nil {
			ready.Reason, ready.Message = "ExchangeFailed", err.Error()
			if serr := r.setReady(ctx, &fc, ready); serr != nil && !apierrors.IsConflict(serr) {
				return ctrl.Result{}, serr
			}
			return ctrl.Result{}, err
		}
		parts, pending = append(parts, msg), pending || nc == nil
		peerConfigs = append(peerConfigs, nc)
	}
	if pending {
		ready.Reason = "Remapping"
		ready.Message = strings.Join(parts, "; ")
		return afterReady(ctrl.Result{RequeueAfter: pollPending}, r.setReady(ctx, &fc, ready))
	}
	// Mapped both ways: ready once the gateway's tunnel to the peer is up
	// (it writes TunnelUp on the peer's NetworkConfig, which wakes this).
	ready.Status, ready.Reason = metav1.ConditionTrue, "TunnelUp"
	for _, nc := range peerConfigs {
		switch c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigTunnelUp); {
		case c == nil:
			ready.Status, ready.Reason = metav1.ConditionFalse, "GatewayNotReporting"
			parts = append(parts, fmt.Sprintf("no gateway reports a tunnel to %s yet: is ferry-gateway running in this cluster?", fc.Spec.ClusterID))
		case c.Status != metav1.ConditionTrue:
			ready.Status, ready.Reason = metav1.ConditionFalse, "TunnelDown"
			parts = append(parts, fmt.Sprintf("tunnel to %s: %s", fc.Spec.ClusterID, c.Message))
		default:
			parts = append(parts, fmt.Sprintf("tunnel to %s: %s", fc.Spec.ClusterID, c.Message))
		}
		if ready.Status != metav1.ConditionTrue {
			break
		}
	}
	ready.Message = strings.Join(parts, "; ")
	return afterReady(ctrl.Result{RequeueAfter: pollSettled}, r.setReady(ctx, &fc, ready))
}

// afterReady is the result of a reconcile that ended writing NetworkReady:
// a conflict (another controller wrote the status first) is retried soon,
// since status changes do not wake this controller.
func afterReady(res ctrl.Result, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return res, err
}

// publish puts this cluster's network into a consumer's tenant namespace,
// and reports where this cluster maps the consumer.
// The NetworkConfig returned is the consumer's, once this cluster mapped it.
func (r *ExchangeReconciler) publish(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, local *ferryv1alpha1.NetworkConfig) (string, *ferryv1alpha1.NetworkConfig, error) {
	ns := r.TenantNamespace(fc)
	pub := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: string(r.ClusterID)}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, pub, func() error {
		metav1.SetMetaDataLabel(&pub.ObjectMeta, ferryv1alpha1.LabelNetworkConfig, ferryv1alpha1.NetworkConfigPublished)
		pub.Spec = local.Spec
		return nil
	})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		// The tenant namespace is not there yet (or being deleted).
		return fmt.Sprintf("waiting for tenant namespace %s", ns), nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("publish NetworkConfig in %s: %w", ns, err)
	}
	var theirs ferryv1alpha1.NetworkConfig
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: string(fc.Spec.ClusterID)}, &theirs); err != nil {
		if apierrors.IsNotFound(err) {
			return "the consumer has not sent its NetworkConfig yet", nil, nil
		}
		return "", nil, err
	}
	msg, done := describeMapping("the consumer", &theirs)
	if !done {
		return msg, nil, nil
	}
	if theirs.Status.PodCIDRAtPeer == "" {
		return msg + "; the consumer has not told where it maps this cluster's pods yet", nil, nil
	}
	return msg, &theirs, nil
}

// exchangeWithProvider sends this cluster's network to a provider, copies
// the provider's, records where the provider maps this cluster, and tells
// the provider where this cluster maps it. The NetworkConfig returned is
// the provider's copy in ferry-system, once mapped both ways.
func (r *ExchangeReconciler) exchangeWithProvider(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, local *ferryv1alpha1.NetworkConfig) (string, *ferryv1alpha1.NetworkConfig, error) {
	remote, tenant, err := r.Providers.For(ctx, fc)
	if err != nil {
		return "", nil, fmt.Errorf("reach provider %s: %w", fc.Spec.ClusterID, err)
	}
	mine := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: string(r.ClusterID)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, remote, mine, func() error {
		metav1.SetMetaDataLabel(&mine.ObjectMeta, ferryv1alpha1.LabelNetworkConfig, ferryv1alpha1.NetworkConfigPeer)
		metav1.SetMetaDataLabel(&mine.ObjectMeta, ferryv1alpha1.LabelOriginCluster, string(r.ClusterID))
		mine.Spec = local.Spec
		return nil
	}); err != nil {
		return "", nil, fmt.Errorf("send NetworkConfig to provider %s (%s/%s): %w", fc.Spec.ClusterID, tenant, r.ClusterID, err)
	}
	var published ferryv1alpha1.NetworkConfig
	if err := remote.Get(ctx, types.NamespacedName{Namespace: tenant, Name: string(fc.Spec.ClusterID)}, &published); err != nil {
		if apierrors.IsNotFound(err) {
			return "the provider has not published its NetworkConfig yet", nil, nil
		}
		return "", nil, fmt.Errorf("read provider %s's NetworkConfig: %w", fc.Spec.ClusterID, err)
	}
	copyNC := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: string(fc.Spec.ClusterID)}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, copyNC, func() error {
		metav1.SetMetaDataLabel(&copyNC.ObjectMeta, ferryv1alpha1.LabelNetworkConfig, ferryv1alpha1.NetworkConfigPeer)
		copyNC.Spec = published.Spec
		// Garbage collection removes the copy with the ForeignCluster,
		// should this controller miss the unpeering.
		return controllerutil.SetOwnerReference(fc, copyNC, r.Scheme())
	}); err != nil {
		return "", nil, fmt.Errorf("copy provider %s's NetworkConfig: %w", fc.Spec.ClusterID, err)
	}
	// Where the provider put this cluster, read from the provider's status
	// of the NetworkConfig this cluster sent.
	atPeer := mine.Status.RemappedPodCIDR
	apiAtPeer := mine.Status.RemappedAPIServerAddress
	if copyNC.Status.PodCIDRAtPeer != atPeer || copyNC.Status.APIServerAddressAtPeer != apiAtPeer {
		copyNC.Status.PodCIDRAtPeer, copyNC.Status.APIServerAddressAtPeer = atPeer, apiAtPeer
		if err := r.Status().Update(ctx, copyNC); err != nil {
			return "", nil, fmt.Errorf("record where provider %s maps this cluster: %w", fc.Spec.ClusterID, err)
		}
	}
	msg, done := describeMapping("the provider", copyNC)
	if !done {
		return msg, nil, nil
	}
	// The provider's gateway translates from where this cluster maps the
	// provider's pods: tell it, on the status of the NetworkConfig sent.
	if mine.Status.PodCIDRAtPeer != copyNC.Status.RemappedPodCIDR || mine.Status.APIServerAddressAtPeer != copyNC.Status.RemappedAPIServerAddress {
		mine.Status.PodCIDRAtPeer, mine.Status.APIServerAddressAtPeer = copyNC.Status.RemappedPodCIDR, copyNC.Status.RemappedAPIServerAddress
		if err := remote.Status().Update(ctx, mine); err != nil {
			if apierrors.IsConflict(err) {
				return msg + "; telling the provider where its pods appear here", nil, nil
			}
			return "", nil, fmt.Errorf("tell provider %s where its pods appear here: %w", fc.Spec.ClusterID, err)
		}
	}
	if atPeer == "" {
		return msg + "; the provider has not mapped this cluster's pods yet", nil, nil
	}
	return fmt.Sprintf("%s; this cluster's pods %s appear there as %s", msg, local.Spec.PodCIDR, atPeer), copyNC, nil
}

// describeMapping tells where this cluster maps a peer, from the peer's
// NetworkConfig; done once the IPAM mapped it.
func describeMapping(who string, nc *ferryv1alpha1.NetworkConfig) (string, bool) {
	c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped)
	switch {
	case c == nil:
		return fmt.Sprintf("%s's network %s is not mapped yet", who, nc.Spec.PodCIDR), false
	case c.Status != metav1.ConditionTrue:
		return fmt.Sprintf("%s's network cannot be mapped: %s", who, c.Message), false
	}
	return fmt.Sprintf("%s's pods %s appear here as %s", who, nc.Spec.PodCIDR, nc.Status.RemappedPodCIDR), true
}

// forgetProvider removes the copies made for a provider: the local one
// (the IPAM then releases its ranges) and, while the credential still
// works, the one sent to it. keepRemote leaves the latter (the fabric is
// disabled but the peering goes on).
func (r *ExchangeReconciler) forgetProvider(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, keepRemote bool) error {
	var copyNC ferryv1alpha1.NetworkConfig
	err := r.Get(ctx, types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: string(fc.Spec.ClusterID)}, &copyNC)
	if err == nil && copyNC.Labels[ferryv1alpha1.LabelNetworkConfig] == ferryv1alpha1.NetworkConfigPeer {
		if err := r.Delete(ctx, &copyNC); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete NetworkConfig of provider %s: %w", fc.Spec.ClusterID, err)
		}
		log.FromContext(ctx).Info("Removed the provider's NetworkConfig", "provider", fc.Spec.ClusterID)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if keepRemote || r.Providers == nil {
		return nil
	}
	// Best effort: the provider deletes the tenant namespace, and the
	// NetworkConfig with it, when it unpeers.
	if remote, tenant, err := r.Providers.For(ctx, fc); err == nil {
		mine := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: string(r.ClusterID)}}
		_ = client.IgnoreNotFound(remote.Delete(ctx, mine))
	}
	return nil
}

// setReady writes the NetworkReady condition when it changed.
func (r *ExchangeReconciler) setReady(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, c metav1.Condition) error {
	c.ObservedGeneration = fc.Generation
	status := fc.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, c)
	if equality.Semantic.DeepEqual(status, &fc.Status) {
		return nil
	}
	fc = fc.DeepCopy()
	fc.Status = *status
	if err := r.Status().Update(ctx, fc); err != nil {
		return fmt.Errorf("update NetworkReady of %s: %w", fc.Name, err)
	}
	return nil
}

// SetupWithManager registers the exchange: ForeignClusters, and any
// NetworkConfig change for the ForeignClusters it concerns.
func (r *ExchangeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("network-exchange").
		// Not on status changes (health, grants): they would make every
		// one a round trip to the provider. Polling covers the provider's side.
		For(&ferryv1alpha1.ForeignCluster{}, builder.WithPredicates(specOrDeletionChanged)).
		Watches(&ferryv1alpha1.NetworkConfig{}, handler.EnqueueRequestsFromMapFunc(r.peersOf)).
		Complete(r)
}

// specOrDeletionChanged passes a ForeignCluster's creation, deletion, spec
// changes (its generation) and the start of its deletion.
var specOrDeletionChanged = predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
})

// peersOf maps a NetworkConfig to the ForeignClusters it concerns: this
// cluster's own to all of them, a peer's to that peer's.
func (r *ExchangeReconciler) peersOf(ctx context.Context, obj client.Object) []reconcile.Request {
	nc := obj.(*ferryv1alpha1.NetworkConfig)
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.List(ctx, &fcs); err != nil {
		log.FromContext(ctx).Error(err, "List ForeignClusters for a NetworkConfig")
		return nil
	}
	var out []reconcile.Request
	for _, fc := range fcs.Items {
		if nc.Spec.ClusterID == r.ClusterID || nc.Spec.ClusterID == fc.Spec.ClusterID {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fc)})
		}
	}
	return out
}
