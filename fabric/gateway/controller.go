package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Timing of the gateway's loop.
const (
	// resync is how often the gateway reads the tunnel's handshakes and
	// probes its peers.
	resync = 10 * time.Second
	// handshakeFresh: WireGuard rekeys every 2 minutes and drops a session
	// after 3; a handshake older than that means the tunnel is down.
	handshakeFresh = 3 * time.Minute
	// DefaultRotationGrace is the time between publishing the next key and
	// switching to it: longer than the peers' NetworkConfig exchange takes
	// to carry it (a minute at most).
	DefaultRotationGrace = 2 * time.Minute
)

var request = reconcile.Request{NamespacedName: client.ObjectKey{Name: "gateway"}}

// Settings are what ferry-gateway is told: where it is reached, its keys
// and the data plane installing the plan.
type Settings struct {
	// Endpoint is the address and port peers reach the gateway at (the
	// Service's, in a cluster); when empty, EndpointService finds it.
	EndpointAddress string
	EndpointPort    int32
	// EndpointService finds the endpoint from the gateway's Service when
	// EndpointAddress is empty.
	EndpointService *ServiceEndpoint
	// PodAddress is the gateway pod's IP, the remote end of the nodes'
	// VXLAN links.
	PodAddress netip.Addr
	// KeySecret is the Secret in ferry-system holding the keys.
	KeySecret string
	// KeyRotation is the automatic rotation period (0: on request only);
	// RotationGrace the notice peers get.
	KeyRotation, RotationGrace time.Duration
	// DataPlane installs the plan.
	DataPlane *DataPlane
}

// Reconciler runs the gateway: it publishes its endpoint and key in this
// cluster's NetworkConfig, installs the Plan of its peers' NetworkConfigs
// in the data plane, and reports TunnelUp on each.
type Reconciler struct {
	client.Client
	// ClusterID of this cluster (its local NetworkConfig's name).
	ClusterID ferryv1alpha1.ClusterID
	Settings
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Health, when set, records each reconcile's outcome (readiness).
	Health *Health
	// Leader, when set, is this replica's part in the active/passive
	// election: a passive replica installs and publishes nothing.
	Leader *Leadership

	keys    *keyStore
	metrics *collector
	probes  sync.Map // cluster ID → time.Duration, the last round trip measured
	// probeErrs holds why the last probe of a peer failed (cluster ID →
	// string), said in its TunnelUp message.
	probeErrs sync.Map
	probing   atomic.Bool // a probe round runs
	mu        sync.Mutex
	names     map[string]string // public key → cluster ID, of the plan in force
}

// peerNames maps the tunnel's peers' public keys to cluster IDs.
func (r *Reconciler) peerNames() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names
}

// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=networkconfigs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=secrets,verbs=get;list;watch;create;update

// Reconcile makes the data plane the plan of the NetworkConfigs now, and
// records the outcome in Health.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if r.Health != nil {
		r.Health.Record(err, r.Now())
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	now := r.Now()
	if !r.Leader.Active() {
		return ctrl.Result{}, nil // woken when it becomes active
	}
	var local ferryv1alpha1.NetworkConfig
	if err := r.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: string(r.ClusterID)}, &local); err != nil {
		if apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("Waiting for this cluster's NetworkConfig (written by ferry-controller-manager)")
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	keys, err := r.keys.load(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	host, port, err := r.endpoint(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.publish(ctx, &local, keys, host, port); err != nil {
		return ctrl.Result{}, err
	}
	var list ferryv1alpha1.NetworkConfigList
	if err := r.List(ctx, &list, client.MatchingLabels{ferryv1alpha1.LabelNetworkConfig: ferryv1alpha1.NetworkConfigPeer}); err != nil {
		return ctrl.Result{}, err
	}
	plan, skipped, err := FromNetworkConfigs(&local, list.Items, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	var applied Applied
	err = r.Leader.Do(func() (err error) {
		applied, err = r.DataPlane.Apply(plan, keys.Current)
		return err
	})
	if errors.Is(err, errPassive) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		r.metrics.setRules(0)
		err = fmt.Errorf("install the tunnel, routes and NAT: %w", err)
		// Say so where users look, then retry with backoff.
		for _, p := range plan.Peers {
			skipped[p.ClusterID] = err.Error()
		}
		if rerr := r.report(ctx, list.Items, Plan{}, skipped, Applied{}, nil, now); rerr != nil {
			log.FromContext(ctx).Error(rerr, "Reporting the data plane's failure")
		}
		return ctrl.Result{}, err
	}
	r.metrics.setRules(applied.Rules)
	names := map[string]string{}
	for _, p := range plan.Peers {
		names[p.PublicKey.String()] = string(p.ClusterID)
	}
	r.mu.Lock()
	r.names = names
	r.mu.Unlock()
	if err := r.publishStatus(ctx, &local, applied); err != nil {
		return ctrl.Result{}, err
	}
	dev, err := r.DataPlane.Device()
	if err != nil {
		return ctrl.Result{}, err
	}
	r.probeInBackground(ctx, plan)
	if err := r.report(ctx, list.Items, plan, skipped, applied, dev, now); err != nil {
		return ctrl.Result{}, err
	}
	next := resync
	for _, t := range []time.Time{plan.NextChange, keys.RotateAt} {
		if !t.IsZero() && t.Sub(now) < next {
			next = max(t.Sub(now), 10*time.Millisecond)
		}
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=services,verbs=get;list;watch

// endpoint is where peers reach the gateway: --endpoint, or else what its
// Service offers (EndpointService).
func (r *Reconciler) endpoint(ctx context.Context) (string, int32, error) {
	if r.EndpointAddress != "" {
		return r.EndpointAddress, r.EndpointPort, nil
	}
	if r.EndpointService == nil {
		return "", 0, fmt.Errorf("no endpoint: set --endpoint, or name the gateway's Service")
	}
	var svc corev1.Service
	key := client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: r.EndpointService.Service}
	if err := r.Get(ctx, key, &svc); err != nil {
		return "", 0, fmt.Errorf("find the gateway's endpoint: read Service %s: %w", key, err)
	}
	host, port, err := r.EndpointService.Endpoint(&svc)
	if err != nil {
		return "", 0, fmt.Errorf("find the gateway's endpoint: %w", err)
	}
	return host, port, nil
}

// publish writes the gateway's endpoint and keys into this cluster's
// NetworkConfig, which the exchange carries to the peers.
func (r *Reconciler) publish(ctx context.Context, local *ferryv1alpha1.NetworkConfig, keys Keys, host string, port int32) error {
	want := &ferryv1alpha1.GatewayEndpoint{Address: host, Port: port, PublicKey: keys.Current.PublicKey().String()}
	if r.PodAddress.IsValid() {
		want.PodAddress = r.PodAddress.String()
	}
	if keys.Next != nil {
		want.NextPublicKey = keys.Next.PublicKey().String()
		want.RotateAt = &metav1.Time{Time: keys.RotateAt}
	}
	if equality.Semantic.DeepEqual(local.Spec.Gateway, want) || !r.Leader.Active() {
		return nil
	}
	// Optimistic: a replica that lost the lease since it read the
	// NetworkConfig never overwrites the new active's endpoint.
	patch := client.MergeFromWithOptions(local.DeepCopy(), client.MergeFromWithOptimisticLock{})
	local.Spec.Gateway = want
	if err := r.Patch(ctx, local, patch); err != nil {
		return fmt.Errorf("publish the gateway's endpoint in NetworkConfig %s: %w", local.Name, err)
	}
	return nil
}

// publishStatus tells this cluster's route agents where the gateway is.
func (r *Reconciler) publishStatus(ctx context.Context, local *ferryv1alpha1.NetworkConfig, applied Applied) error {
	want := &ferryv1alpha1.GatewayStatus{OverlayAddress: r.PodAddress.String(), VXLANPort: int32(r.DataPlane.VXLANPort),
		VNI: int32(r.DataPlane.VNI), MTU: int32(applied.MTU), TunnelKind: applied.Kind, Replica: r.Leader.Identity()}
	if applied.MTU == 0 {
		want = nil // no peer, no tunnel: nodes remove their routes
	}
	if equality.Semantic.DeepEqual(local.Status.Gateway, want) || !r.Leader.Active() {
		return nil
	}
	patch := client.MergeFromWithOptions(local.DeepCopy(), client.MergeFromWithOptimisticLock{})
	local.Status.Gateway = want
	if err := r.Status().Patch(ctx, local, patch); err != nil {
		return fmt.Errorf("publish the gateway's overlay address: %w", err)
	}
	return nil
}

// report writes TunnelUp and the tunnel's state on each peer NetworkConfig.
func (r *Reconciler) report(ctx context.Context, ncs []ferryv1alpha1.NetworkConfig, plan Plan, skipped Skipped, applied Applied, dev *wgtypes.Device, now time.Time) error {
	byKey := map[wgtypes.Key]wgtypes.Peer{}
	if dev != nil {
		for _, p := range dev.Peers {
			byKey[p.PublicKey] = p
		}
	}
	planned := map[ferryv1alpha1.ClusterID]Peer{}
	for _, p := range plan.Peers {
		planned[p.ClusterID] = p
	}
	var errs []error
	for i := range ncs {
		nc := &ncs[i]
		id := nc.Spec.ClusterID
		cond := metav1.Condition{Type: ferryv1alpha1.NetworkConfigTunnelUp, Status: metav1.ConditionFalse}
		var tunnel *ferryv1alpha1.TunnelStatus
		p, ok := planned[id]
		switch {
		case !ok:
			cond.Reason, cond.Message = "NotConfigured", skipped[id]
			if cond.Message == "" {
				cond.Message = "not configured"
			}
		case applied.EndpointErrors[string(id)] != nil:
			cond.Reason, cond.Message = "EndpointUnresolved", fmt.Sprintf("endpoint %s: %v", p.Endpoint, applied.EndpointErrors[string(id)])
		default:
			wp := byKey[p.PublicKey]
			tunnel = &ferryv1alpha1.TunnelStatus{Endpoint: p.Endpoint}
			if wp.Endpoint != nil {
				tunnel.Endpoint = wp.Endpoint.String()
			}
			if !wp.LastHandshakeTime.IsZero() {
				tunnel.LastHandshakeTime = &metav1.Time{Time: wp.LastHandshakeTime.Truncate(time.Second)}
			}
			if rtt, ok := r.probes.Load(string(id)); ok {
				tunnel.RoundTripTime = &metav1.Duration{Duration: rtt.(time.Duration)}
			}
			switch age := now.Sub(wp.LastHandshakeTime); {
			case wp.LastHandshakeTime.IsZero():
				cond.Reason, cond.Message = "NoHandshake", fmt.Sprintf("no handshake with %s yet (%s tunnel)", tunnel.Endpoint, applied.Kind)
			case age > handshakeFresh:
				cond.Reason, cond.Message = "HandshakeStale", fmt.Sprintf("last handshake with %s %s ago", tunnel.Endpoint, age.Round(time.Second))
			default:
				cond.Status, cond.Reason = metav1.ConditionTrue, "Handshake"
				cond.Message = fmt.Sprintf("%s tunnel to %s, pods %s routed there", applied.Kind, tunnel.Endpoint, p.Pods.To)
				if why, ok := r.probeErrs.Load(string(id)); ok {
					// The tunnel is up, but its round trip is unknown: say why.
					cond.Message += fmt.Sprintf("; round-trip probe of %s failed: %s", p.Probe, why)
				}
			}
		}
		if err := r.writeTunnel(ctx, nc, cond, tunnel); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("report tunnels: %v", errs)
	}
	return nil
}

// writeTunnel updates a peer NetworkConfig's TunnelUp and tunnel state when
// they changed enough to matter: the condition, the handshake, or the
// round trip by a fifth.
func (r *Reconciler) writeTunnel(ctx context.Context, nc *ferryv1alpha1.NetworkConfig, cond metav1.Condition, tunnel *ferryv1alpha1.TunnelStatus) error {
	old := meta.FindStatusCondition(nc.Status.Conditions, cond.Type)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && sameTunnel(nc.Status.Tunnel, tunnel) {
		return nil
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur ferryv1alpha1.NetworkConfig
		if err := r.Get(ctx, client.ObjectKeyFromObject(nc), &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		cond.ObservedGeneration = cur.Generation
		meta.SetStatusCondition(&cur.Status.Conditions, cond)
		cur.Status.Tunnel = tunnel
		if err := r.Status().Update(ctx, &cur); err != nil {
			return err
		}
		return nil
	})
}

func sameTunnel(a, b *ferryv1alpha1.TunnelStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Endpoint != b.Endpoint || !equality.Semantic.DeepEqual(a.LastHandshakeTime, b.LastHandshakeTime) {
		return false
	}
	if (a.RoundTripTime == nil) != (b.RoundTripTime == nil) {
		return false
	}
	if a.RoundTripTime == nil {
		return true
	}
	x, y := a.RoundTripTime.Duration, b.RoundTripTime.Duration
	return 5*(x-y) <= y && 5*(y-x) <= y
}

// SetupWithManager registers the gateway: one reconcile key, woken by any
// NetworkConfig or key Secret change and every resync.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.RotationGrace == 0 {
		r.RotationGrace = DefaultRotationGrace
	}
	r.keys = &keyStore{Client: r.Client, key: client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: r.KeySecret},
		every: r.KeyRotation, grace: r.RotationGrace, now: r.Now}
	r.metrics = newCollector(r)
	if err := registerCollector(r.metrics); err != nil {
		return err
	}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{request} })
	b := ctrl.NewControllerManagedBy(mgr).
		Named("gateway").
		WatchesRawSource(startNow()).
		Watches(&ferryv1alpha1.NetworkConfig{}, all).
		// A rotation asked for on the key Secret is seen at once.
		Watches(&corev1.Secret{}, all, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ferryv1alpha1.SystemNamespace && o.GetName() == r.KeySecret
		})))
	if s := r.EndpointService; s != nil && r.EndpointAddress == "" {
		// A load balancer's address, or a node port, is published at once.
		b = b.Watches(&corev1.Service{}, all, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ferryv1alpha1.SystemNamespace && o.GetName() == s.Service
		})))
	}
	if r.Leader != nil {
		b = b.WatchesRawSource(r.Leader.source())
	}
	return b.Complete(r)
}

// describeRanges is a short list of prefixes for logs.
func describeRanges(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}
