// Package network gives a virtual kubelet the network fabric's view of its
// provider: where the provider's pods appear in this cluster, where this
// cluster's pods and API server appear in the provider. It follows the
// NetworkConfigs of ferry-system that the controller manager's fabric
// writes, and translates with github.com/ferry-io/ferry/fabric.
package network

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
)

// Translator translates addresses between this cluster and one provider.
// Until the fabric has mapped both ways, translations return "" (an address
// that would not be reachable is never shown); when the fabric is disabled,
// addresses pass unchanged. Its zero value is not usable: use New.
type Translator struct {
	consumer, provider ferryv1alpha1.ClusterID
	disabled           bool
	state              atomic.Pointer[state]

	mu   sync.Mutex
	subs []chan struct{}
}

// state is one consistent view of the two NetworkConfigs.
type state struct {
	fromProvider, toProvider *fabric.Mapping
	apiServer                netip.Addr
	apiServerPort            int32
}

// New returns a translator for the provider's addresses; disabled makes it
// the identity.
func New(consumer, provider ferryv1alpha1.ClusterID, disabled bool) *Translator {
	t := &Translator{consumer: consumer, provider: provider, disabled: disabled}
	t.state.Store(&state{})
	return t
}

// +kubebuilder:rbac:groups=ferry.io,namespace=ferry-system,resources=networkconfigs,verbs=get;list;watch

// Run follows the NetworkConfigs in ferry-system through c (a ferry.io REST
// client of this cluster) until ctx is done; a disabled translator returns
// at once.
func (t *Translator) Run(ctx context.Context, c rest.Interface) {
	if t.disabled {
		return
	}
	logger := klog.FromContext(ctx).WithName("network")
	var store cache.Store
	update := func(any) { t.recompute(logger, store) }
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &logger,
		ListerWatcher: cache.NewFilteredListWatchFromClient(c, "networkconfigs", ferryv1alpha1.SystemNamespace, func(*metav1.ListOptions) {}),
		ObjectType:    &ferryv1alpha1.NetworkConfig{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    update,
			UpdateFunc: func(_, o any) { update(o) },
			DeleteFunc: update,
		},
	})
	informer.RunWithContext(ctx)
}

// recompute reads the two NetworkConfigs and, when the view changed,
// stores it and tells the subscribers.
func (t *Translator) recompute(logger klog.Logger, store cache.Store) {
	next := &state{}
	var local, peer *ferryv1alpha1.NetworkConfig
	for _, o := range store.List() {
		nc := o.(*ferryv1alpha1.NetworkConfig)
		switch {
		case nc.Name == string(t.consumer) && nc.Labels[ferryv1alpha1.LabelNetworkConfig] == ferryv1alpha1.NetworkConfigLocal:
			local = nc
		case nc.Name == string(t.provider) && nc.Labels[ferryv1alpha1.LabelNetworkConfig] == ferryv1alpha1.NetworkConfigPeer:
			peer = nc
		}
	}
	if peer != nil && peer.Status.RemappedPodCIDR != "" && meta.IsStatusConditionTrue(peer.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped) {
		next.fromProvider = mapping(logger, "the provider's pods", peer.Spec.PodCIDR, peer.Status.RemappedPodCIDR)
	}
	if peer != nil && local != nil && peer.Status.PodCIDRAtPeer != "" {
		next.toProvider = mapping(logger, "this cluster's pods", local.Spec.PodCIDR, peer.Status.PodCIDRAtPeer)
	}
	if peer != nil && local != nil && local.Spec.APIServer != nil && peer.Status.APIServerAddressAtPeer != "" {
		if a, err := netip.ParseAddr(peer.Status.APIServerAddressAtPeer); err == nil {
			next.apiServer, next.apiServerPort = a, local.Spec.APIServer.Port
		}
	}
	if next.equal(t.state.Load()) {
		return
	}
	t.state.Store(next)
	logger.Info("Network mapping changed", "provider", t.provider, "providerPods", next.fromProvider, "podsAtProvider", next.toProvider, "apiServerAtProvider", next.apiServer)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		select {
		case s <- struct{}{}:
		default:
		}
	}
}

func mapping(logger klog.Logger, what, from, to string) *fabric.Mapping {
	f, err1 := fabric.ParsePrefix("spec.podCIDR", from)
	tt, err2 := fabric.ParsePrefix("remapped CIDR", to)
	if err1 != nil || err2 != nil {
		logger.Error(nil, "Unusable network mapping", "of", what, "from", from, "to", to)
		return nil
	}
	m, err := fabric.NewMapping(f, tt)
	if err != nil {
		logger.Error(err, "Unusable network mapping", "of", what)
		return nil
	}
	return &m
}

func (s *state) equal(o *state) bool {
	eq := func(a, b *fabric.Mapping) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return eq(s.fromProvider, o.fromProvider) && eq(s.toProvider, o.toProvider) && s.apiServer == o.apiServer && s.apiServerPort == o.apiServerPort
}

// Changed returns a channel that receives (without blocking the sender:
// signals coalesce) each time the mapping changes.
func (t *Translator) Changed() <-chan struct{} {
	c := make(chan struct{}, 1)
	t.mu.Lock()
	t.subs = append(t.subs, c)
	t.mu.Unlock()
	return c
}

// ProviderPodIP is where this cluster reaches a provider pod IP; "" when it
// cannot (not mapped yet, or outside the provider's pod CIDR, such as a
// host-network pod's node address).
func (t *Translator) ProviderPodIP(ip string) string {
	if t.disabled {
		return ip
	}
	return translate(t.state.Load().fromProvider, ip)
}

// LocalPodIP is where the provider reaches a pod IP of this cluster; "" when
// it cannot (not mapped yet, or not a pod address of this cluster: a node
// address, or a pod offloaded to another provider).
func (t *Translator) LocalPodIP(ip string) string {
	if t.disabled {
		return ip
	}
	return translate(t.state.Load().toProvider, ip)
}

// APIServer is where pods in the provider reach this cluster's API server;
// ok false while unknown or when the fabric is disabled.
func (t *Translator) APIServer() (addr string, port int32, ok bool) {
	s := t.state.Load()
	if t.disabled || !s.apiServer.IsValid() {
		return "", 0, false
	}
	return s.apiServer.String(), s.apiServerPort, true
}

func translate(m *fabric.Mapping, ip string) string {
	if m == nil {
		return ""
	}
	out, ok := m.TranslateString(ip)
	if !ok {
		return ""
	}
	return out
}

// LocalPodCIDR is this cluster's pod range and where the provider sees it,
// for translating address blocks. mapped is false while the fabric has not
// mapped it; when the fabric is disabled both prefixes are invalid (one
// flat network: blocks pass unchanged) and mapped is true.
func (t *Translator) LocalPodCIDR() (local, atProvider netip.Prefix, mapped bool) {
	if t.disabled {
		return netip.Prefix{}, netip.Prefix{}, true
	}
	m := t.state.Load().toProvider
	if m == nil {
		return netip.Prefix{}, netip.Prefix{}, false
	}
	return m.From, m.To, true
}
