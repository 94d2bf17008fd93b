// Package gateway is ferry's network gateway: what a cluster's gateway
// installs for its peers (Plan, computed from NetworkConfigs alone), the
// data plane that installs it in a network namespace (a WireGuard device,
// nftables 1:1 prefix NAT, routes and the VXLAN end nodes reach it by),
// the node side of that overlay (NodePlane, run by the route agent), and
// the controllers that drive them from the API (ferry-gateway).
//
// # Addresses
//
// Each cluster sees a peer's pods at the peer's remapped CIDR R (its IPAM's
// choice) and is seen by the peer at A (the peer's choice, reported in
// status.podCIDRAtPeer). A packet crosses the tunnel with its source already
// in the receiver's address space and its destination still in the
// sender's: the sender translates its own pods' sources L→A on the way out,
// the receiver translates the destination A→L on the way in. Both are
// unique where they are looked at (WireGuard's allowed IPs of the peer
// are R on each side), so any number of clusters may share one pod CIDR.
// Connection tracking reverses both for the replies.
package gateway

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	"k8s.io/apimachinery/pkg/api/meta"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric"
)

// Peer is one remote cluster the gateway tunnels to.
type Peer struct {
	// ClusterID of the peer.
	ClusterID ferryv1alpha1.ClusterID
	// PublicKey is the peer gateway's WireGuard key in force now.
	PublicKey wgtypes.Key
	// Endpoint is the peer gateway's UDP endpoint, host:port.
	Endpoint string
	// Pods maps the peer's pod CIDR (as the peer sees it) to where its pods
	// appear here (R).
	Pods fabric.Mapping
	// APIServer is where the peer's API server appears here, if anywhere.
	APIServer netip.Addr
	// LocalAtPeer maps this cluster's pod CIDR to where the peer sees it (A).
	LocalAtPeer fabric.Mapping
	// APIServerAtPeer is where the peer's pods reach this cluster's API
	// server, if anywhere.
	APIServerAtPeer netip.Addr
	// Probe is the peer gateway pod's address here, pinged to measure the
	// round trip; invalid when the peer does not publish it.
	Probe netip.Addr
}

// Addresses are the peer's addresses here: what is routed into the tunnel
// toward it, and the only sources accepted from it.
func (p Peer) Addresses() []netip.Prefix {
	out := []netip.Prefix{p.Pods.To}
	if p.APIServer.IsValid() && !p.Pods.To.Contains(p.APIServer) {
		out = append(out, netip.PrefixFrom(p.APIServer, p.APIServer.BitLen()))
	}
	return out
}

// Plan is everything a gateway installs.
type Plan struct {
	// LocalPods is this cluster's pod CIDR (L).
	LocalPods netip.Prefix
	// APIServer is this cluster's API server address (the kubernetes
	// Service's IP), the target of its peers' APIServerAtPeer.
	APIServer netip.Addr
	// Peers, by cluster ID.
	Peers []Peer
	// NextChange is when a published key rotation takes effect and the plan
	// must be computed again; zero when none is pending.
	NextChange time.Time
}

// Skipped says why a peer NetworkConfig has no tunnel (yet).
type Skipped map[ferryv1alpha1.ClusterID]string

// FromNetworkConfigs computes the plan from this cluster's NetworkConfig and
// its peers' (label ferry.io/network-config=peer, mapped by this cluster's
// IPAM: condition Remapped true). A peer known twice (peering both ways)
// gets one tunnel. now decides which of a rotating peer's keys is in force.
func FromNetworkConfigs(local *ferryv1alpha1.NetworkConfig, peers []ferryv1alpha1.NetworkConfig, now time.Time) (Plan, Skipped, error) {
	var plan Plan
	var err error
	if plan.LocalPods, err = fabric.ParsePrefix("spec.podCIDR", local.Spec.PodCIDR); err != nil {
		return Plan{}, nil, fmt.Errorf("local NetworkConfig %s: %w", local.Name, err)
	}
	if local.Spec.APIServer != nil {
		if plan.APIServer, err = netip.ParseAddr(local.Spec.APIServer.Address); err != nil {
			return Plan{}, nil, fmt.Errorf("local NetworkConfig %s: spec.apiServer.address %q: not an IP address", local.Name, local.Spec.APIServer.Address)
		}
	}
	skipped := Skipped{}
	seen := map[ferryv1alpha1.ClusterID]bool{}
	// ferry-system's copies (of providers) first: they win over a tenant
	// namespace's copy of the same cluster.
	sorted := slices.Clone(peers)
	slices.SortStableFunc(sorted, func(a, b ferryv1alpha1.NetworkConfig) int {
		return cmp.Compare(boolRank(a.Namespace != ferryv1alpha1.SystemNamespace), boolRank(b.Namespace != ferryv1alpha1.SystemNamespace))
	})
	for i := range sorted {
		nc := &sorted[i]
		id := nc.Spec.ClusterID
		if seen[id] || nc.Labels[ferryv1alpha1.LabelNetworkConfig] != ferryv1alpha1.NetworkConfigPeer || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		p, next, why := peerFrom(nc, plan.LocalPods, now)
		if why != "" {
			if _, ok := skipped[id]; !ok {
				skipped[id] = why
			}
			continue
		}
		delete(skipped, id)
		seen[id] = true
		plan.Peers = append(plan.Peers, p)
		if !next.IsZero() && (plan.NextChange.IsZero() || next.Before(plan.NextChange)) {
			plan.NextChange = next
		}
	}
	slices.SortFunc(plan.Peers, func(a, b Peer) int { return cmp.Compare(a.ClusterID, b.ClusterID) })
	return plan, skipped, nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// peerFrom reads one peer; why says what is missing.
func peerFrom(nc *ferryv1alpha1.NetworkConfig, localPods netip.Prefix, now time.Time) (Peer, time.Time, string) {
	p := Peer{ClusterID: nc.Spec.ClusterID}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped) {
		return p, time.Time{}, "this cluster's IPAM has not mapped the peer's pod CIDR"
	}
	gw := nc.Spec.Gateway
	if gw == nil {
		return p, time.Time{}, "the peer's gateway has not published its endpoint and key"
	}
	if nc.Status.PodCIDRAtPeer == "" {
		return p, time.Time{}, "the peer has not told where it maps this cluster's pods"
	}
	var next time.Time
	key := gw.PublicKey
	if gw.NextPublicKey != "" && gw.RotateAt != nil {
		if now.Before(gw.RotateAt.Time) {
			next = gw.RotateAt.Time
		} else {
			key = gw.NextPublicKey
		}
	}
	var err error
	if p.PublicKey, err = wgtypes.ParseKey(key); err != nil {
		return p, time.Time{}, fmt.Sprintf("spec.gateway.publicKey: %v", err)
	}
	if gw.Address == "" || gw.Port < 1 || gw.Port > 65535 {
		return p, time.Time{}, fmt.Sprintf("spec.gateway: bad endpoint %q port %d", gw.Address, gw.Port)
	}
	p.Endpoint = net.JoinHostPort(gw.Address, strconv.Itoa(int(gw.Port)))
	theirs, err := fabric.ParsePrefix("spec.podCIDR", nc.Spec.PodCIDR)
	if err != nil {
		return p, time.Time{}, err.Error()
	}
	here, err := fabric.ParsePrefix("status.remappedPodCIDR", nc.Status.RemappedPodCIDR)
	if err != nil {
		return p, time.Time{}, err.Error()
	}
	if p.Pods, err = fabric.NewMapping(theirs, here); err != nil {
		return p, time.Time{}, err.Error()
	}
	atPeer, err := fabric.ParsePrefix("status.podCIDRAtPeer", nc.Status.PodCIDRAtPeer)
	if err != nil {
		return p, time.Time{}, err.Error()
	}
	if p.LocalAtPeer, err = fabric.NewMapping(localPods, atPeer); err != nil {
		return p, time.Time{}, fmt.Sprintf("status.podCIDRAtPeer: %v", err)
	}
	if s := nc.Status.RemappedAPIServerAddress; s != "" {
		if p.APIServer, err = netip.ParseAddr(s); err != nil {
			return p, time.Time{}, fmt.Sprintf("status.remappedAPIServerAddress %q: not an IP address", s)
		}
	}
	if s := nc.Status.APIServerAddressAtPeer; s != "" {
		if p.APIServerAtPeer, err = netip.ParseAddr(s); err != nil {
			return p, time.Time{}, fmt.Sprintf("status.apiServerAddressAtPeer %q: not an IP address", s)
		}
	}
	if gw.PodAddress != "" {
		if a, err := netip.ParseAddr(gw.PodAddress); err == nil {
			p.Probe, _ = p.Pods.Translate(a)
		}
	}
	return p, next, ""
}
