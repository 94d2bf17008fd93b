package fabric

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
)

// ipamRequest is the one request the IPAM reconciles: it maps all peers at once,
// so allocations are decided in one place, in one order.
var ipamRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "ipam"}}

// IPAMReconciler keeps this cluster's local NetworkConfig (its pod and
// service CIDRs, API server and external CIDR) and maps every peer
// NetworkConfig: status.remappedPodCIDR, remappedAPIServerAddress and the
// Remapped condition. Allocations live in the ConfigMap ferry-ipam.
type IPAMReconciler struct {
	client.Client
	// APIReader reads what must be fresh (the allocation table) or is not
	// worth a cluster-wide cache (the kubernetes Service, ServiceCIDRs).
	APIReader client.Reader
	// ClusterID of this cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Options of the fabric.
	Options Options
	// TenantNamespace is where a consumer's objects live on this cluster:
	// a peer NetworkConfig outside ferry-system counts only there.
	TenantNamespace func(*ferryv1alpha1.ForeignCluster) string

	settings settings
}

// Resync is how often the IPAM looks again without a trigger.
const Resync = 5 * time.Minute

// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=services,resourceNames=kubernetes,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get

// Reconcile discovers this cluster's network and maps every peer.
func (r *IPAMReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	d, derr := discover(ctx, r.Client, r.APIReader, r.settings)
	if derr != nil && !errors.Is(derr, errPodCIDRUnknown) {
		return ctrl.Result{}, derr
	}
	var configs ferryv1alpha1.NetworkConfigList
	if err := r.List(ctx, &configs); err != nil {
		return ctrl.Result{}, fmt.Errorf("list NetworkConfigs: %w", err)
	}
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.List(ctx, &fcs); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ForeignClusters: %w", err)
	}
	local := localConfigOf(configs.Items, r.ClusterID)
	if derr != nil {
		// Without a pod CIDR there is nothing to map against; the
		// ForeignClusters' NetworkReady says why.
		logger.Info("Network fabric waits for this cluster's pod CIDR", "reason", derr.Error())
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}

	peers, valid := r.peerNetworks(configs.Items, fcs.Items)
	st, err := loadAllocations(ctx, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	ln := localNetwork{clusterID: r.ClusterID, podCIDR: d.podCIDR, serviceCIDR: d.serviceCIDR, nodeIPs: d.nodeIPs, reserved: r.settings.reserved}
	res, planErr := plan(st.holders, ln, peers, r.settings.pool)
	if planErr == nil {
		if err := saveAllocations(ctx, r.Client, st, res.holders); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				return ctrl.Result{Requeue: true}, nil
			}
			return ctrl.Result{}, err
		}
		if !maps.Equal(st.holders, res.holders) {
			logger.Info("IPAM allocations changed", "allocations", res.holders)
		}
	}
	if err := r.writeLocal(ctx, local, d, res, planErr); err != nil {
		return ctrl.Result{}, err
	}
	for i := range configs.Items {
		nc := &configs.Items[i]
		if nc.Labels[ferryv1alpha1.LabelNetworkConfig] != ferryv1alpha1.NetworkConfigPeer {
			continue
		}
		if err := r.writePeer(ctx, nc, valid[client.ObjectKeyFromObject(nc)], res, planErr); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: Resync}, nil
}

// localConfigOf finds this cluster's own NetworkConfig in a list.
func localConfigOf(items []ferryv1alpha1.NetworkConfig, id ferryv1alpha1.ClusterID) *ferryv1alpha1.NetworkConfig {
	for i := range items {
		nc := &items[i]
		if nc.Namespace == ferryv1alpha1.SystemNamespace && nc.Name == string(id) && nc.Labels[ferryv1alpha1.LabelNetworkConfig] == ferryv1alpha1.NetworkConfigLocal {
			return nc
		}
	}
	return nil
}

// peerNetworks collects the peers to map, one per cluster ID, and says for
// each peer NetworkConfig why it does not count ("" when it does): outside
// ferry-system, a NetworkConfig counts only in the tenant namespace of the
// consumer it names, under that consumer's name.
func (r *IPAMReconciler) peerNetworks(items []ferryv1alpha1.NetworkConfig, fcs []ferryv1alpha1.ForeignCluster) ([]peerNetwork, map[types.NamespacedName]string) {
	tenants := map[string]ferryv1alpha1.ClusterID{}
	for i := range fcs {
		if fcs[i].Spec.IsConsumer() && fcs[i].DeletionTimestamp.IsZero() {
			tenants[r.TenantNamespace(&fcs[i])] = fcs[i].Spec.ClusterID
		}
	}
	// ferry-system first: a cluster that is both consumer and provider of a
	// peer has two copies of its NetworkConfig; the provider's one rules.
	// (Sorted as a copy: the caller holds pointers into items.)
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b ferryv1alpha1.NetworkConfig) int {
		return boolRank(a.Namespace != ferryv1alpha1.SystemNamespace) - boolRank(b.Namespace != ferryv1alpha1.SystemNamespace)
	})
	why := map[types.NamespacedName]string{}
	seen := map[ferryv1alpha1.ClusterID]bool{}
	var out []peerNetwork
	for i := range items {
		nc := &items[i]
		if nc.Labels[ferryv1alpha1.LabelNetworkConfig] != ferryv1alpha1.NetworkConfigPeer {
			continue
		}
		key := client.ObjectKeyFromObject(nc)
		id := nc.Spec.ClusterID
		switch {
		case !nc.DeletionTimestamp.IsZero():
			why[key] = "being deleted"
			continue
		case id == r.ClusterID:
			why[key] = "it names this cluster"
			continue
		case nc.Name != string(id):
			why[key] = fmt.Sprintf("a peer NetworkConfig must be named after its spec.clusterID %s", id)
			continue
		case nc.Namespace != ferryv1alpha1.SystemNamespace && tenants[nc.Namespace] != id:
			why[key] = fmt.Sprintf("namespace %s is not the tenant namespace of consumer %s", nc.Namespace, id)
			continue
		}
		p := peerNetwork{id: id}
		var err error
		if p.podCIDR, err = fabric.ParsePrefix("spec.podCIDR", nc.Spec.PodCIDR); err != nil {
			why[key] = err.Error()
			continue
		}
		if nc.Spec.ExternalCIDR != "" {
			if p.externalCIDR, err = fabric.ParsePrefix("spec.externalCIDR", nc.Spec.ExternalCIDR); err != nil {
				why[key] = err.Error()
				continue
			}
		}
		if nc.Spec.APIServer != nil {
			if p.apiServer, err = netip.ParseAddr(nc.Spec.APIServer.Address); err != nil {
				why[key] = fmt.Sprintf("spec.apiServer.address %q: not an IP address", nc.Spec.APIServer.Address)
				continue
			}
			p.apiServer = p.apiServer.Unmap()
		}
		why[key] = ""
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, p)
	}
	return out, why
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeLocal creates or updates this cluster's own NetworkConfig.
func (r *IPAMReconciler) writeLocal(ctx context.Context, have *ferryv1alpha1.NetworkConfig, d discovered, res planResult, planErr error) error {
	spec := ferryv1alpha1.NetworkConfigSpec{ClusterID: r.ClusterID, PodCIDR: d.podCIDR.String()}
	if d.serviceCIDR.IsValid() {
		spec.ServiceCIDR = d.serviceCIDR.String()
	}
	if res.external.IsValid() {
		spec.ExternalCIDR = res.external.String()
	}
	if d.apiServer.IsValid() {
		spec.APIServer = &ferryv1alpha1.APIServerEndpoint{Address: d.apiServer.String(), Port: d.apiServerPort}
	}
	nc := have
	if nc == nil {
		nc = &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: string(r.ClusterID),
			Labels: map[string]string{ferryv1alpha1.LabelNetworkConfig: ferryv1alpha1.NetworkConfigLocal}}, Spec: spec}
		if err := r.Create(ctx, nc); err != nil {
			return fmt.Errorf("create local NetworkConfig: %w", err)
		}
	} else {
		if have.Spec.Gateway != nil {
			spec.Gateway = have.Spec.Gateway // the gateway's to write
		}
		if !equality.Semantic.DeepEqual(have.Spec, spec) {
			nc = have.DeepCopy()
			nc.Spec = spec
			if err := r.Update(ctx, nc); err != nil {
				return fmt.Errorf("update local NetworkConfig: %w", err)
			}
		}
	}
	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	msg := fmt.Sprintf("pod CIDR %s %s; service CIDR %s", d.podCIDR, d.podSource, d.serviceSource)
	if d.serviceCIDR.IsValid() {
		msg = fmt.Sprintf("pod CIDR %s %s; service CIDR %s %s", d.podCIDR, d.podSource, d.serviceCIDR, d.serviceSource)
	}
	setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigDiscovered, true, "Discovered", msg)
	switch {
	case planErr != nil:
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, false, "PoolUnusable", planErr.Error())
	case res.externalErr != nil:
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, false, "PoolExhausted", res.externalErr.Error())
	default:
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, true, "ExternalCIDRAllocated",
			fmt.Sprintf("peers whose networks overlap %s see this cluster's pods at %s when it is free there", d.podCIDR, res.external))
	}
	return r.writeStatus(ctx, nc, status)
}

// writePeer records where one peer is mapped.
func (r *IPAMReconciler) writePeer(ctx context.Context, nc *ferryv1alpha1.NetworkConfig, invalid string, res planResult, planErr error) error {
	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	m, mapped := res.peers[nc.Spec.ClusterID]
	switch {
	case invalid != "":
		status.RemappedPodCIDR, status.RemappedAPIServerAddress = "", ""
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, false, "Ignored", invalid)
	case planErr != nil:
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, false, "PoolUnusable", planErr.Error())
	case !mapped:
		return nil
	case m.err != nil:
		status.RemappedPodCIDR = ""
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, false, "PoolExhausted", m.err.Error())
	default:
		status.RemappedPodCIDR = m.podCIDR.String()
		status.RemappedAPIServerAddress = ""
		if m.apiServer.IsValid() {
			status.RemappedAPIServerAddress = m.apiServer.String()
		}
		reason := "Remapped"
		if m.podCIDR.String() == nc.Spec.PodCIDR {
			reason = "NoOverlap"
		}
		setCondition(status, nc.Generation, ferryv1alpha1.NetworkConfigRemapped, true, reason, m.why)
	}
	return r.writeStatus(ctx, nc, status)
}

func (r *IPAMReconciler) writeStatus(ctx context.Context, nc *ferryv1alpha1.NetworkConfig, status *ferryv1alpha1.NetworkConfigStatus) error {
	if equality.Semantic.DeepEqual(status, &nc.Status) {
		return nil
	}
	nc = nc.DeepCopy()
	nc.Status = *status
	if err := r.Status().Update(ctx, nc); err != nil {
		return fmt.Errorf("update status of NetworkConfig %s/%s: %w", nc.Namespace, nc.Name, err)
	}
	return nil
}

func setCondition(status *ferryv1alpha1.NetworkConfigStatus, gen int64, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// SetupWithManager registers the IPAM: any NetworkConfig, ForeignCluster or
// relevant Node change maps everything again.
func (r *IPAMReconciler) SetupWithManager(mgr ctrl.Manager) error {
	s, err := r.Options.parse()
	if err != nil {
		return err
	}
	r.settings = s
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{ipamRequest} })
	nodeChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		return !slices.Equal(o.Spec.PodCIDRs, n.Spec.PodCIDRs) || !equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ipam").
		WatchesRawSource(startNow()).
		Watches(&ferryv1alpha1.NetworkConfig{}, all).
		// Which tenant namespaces count depends on specs, not statuses.
		Watches(&ferryv1alpha1.ForeignCluster{}, all, builder.WithPredicates(specOrDeletionChanged)).
		Watches(&corev1.Node{}, all, builder.WithPredicates(nodeChanged)).
		Complete(r)
}

// startNow enqueues the IPAM once at start, so an idle cluster (no node, no
// peer yet) still gets its local NetworkConfig.
func startNow() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(ipamRequest)
		return nil
	})
}
