package gateway

import (
	"net"
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/fabric/nat"
	"github.com/ferry-io/ferry/fabric/overlay"
)

// KeepAlive is the WireGuard persistent keepalive toward every peer: it
// keeps NAT and load balancer mappings of the UDP endpoint open, and lets a
// restarted gateway's handshake reach a peer that sends nothing.
const KeepAlive = 10 * time.Second

// NAT is the plan's nftables ruleset: for each peer, the destination of new
// connections from the tunnel translated from where the peer sees this
// cluster (A, and this cluster's API server at the peer) to the real
// addresses, and the source of new connections into the tunnel from this
// cluster's pods to A. Its forward filter lets through only traffic
// between the peers' addresses, by the tunnel, and this cluster's pods
// (and API server, when a peer reaches it), by the overlay link from the
// nodes; it drops and counts whatever else the gateway would forward.
func (p Plan) NAT(table, tunnel, overlay string) nat.Ruleset {
	rs := nat.Ruleset{Table: table, Tunnel: tunnel, Overlay: overlay, ClampMSS: true}
	if p.LocalPods.IsValid() {
		rs.Local = append(rs.Local, p.LocalPods.Masked())
	}
	apiServerReached := false
	for _, peer := range p.Peers {
		np := nat.Peer{Name: string(peer.ClusterID), Addresses: peer.Addresses()}
		if !peer.LocalAtPeer.IsIdentity() {
			np.Ingress = append(np.Ingress, peer.LocalAtPeer.Inverse())
			np.Egress = append(np.Egress, peer.LocalAtPeer)
		}
		if peer.APIServerAtPeer.IsValid() && p.APIServer.IsValid() && peer.APIServerAtPeer != p.APIServer &&
			peer.APIServerAtPeer.Is4() == p.APIServer.Is4() {
			from := netip.PrefixFrom(peer.APIServerAtPeer, peer.APIServerAtPeer.BitLen())
			to := netip.PrefixFrom(p.APIServer, p.APIServer.BitLen())
			if m, err := fabric.NewMapping(from, to); err == nil {
				np.Ingress = append(np.Ingress, m)
				apiServerReached = true
			}
		}
		rs.Peers = append(rs.Peers, np)
	}
	if apiServerReached && !p.LocalPods.Contains(p.APIServer) {
		rs.Local = append(rs.Local, netip.PrefixFrom(p.APIServer, p.APIServer.BitLen()))
	}
	return rs
}

// TunnelRoutes route every peer's addresses into the tunnel.
func (p Plan) TunnelRoutes(tunnel string) []overlay.Route {
	var out []overlay.Route
	for _, peer := range p.Peers {
		for _, a := range peer.Addresses() {
			out = append(out, overlay.Route{Dst: a, Link: tunnel})
		}
	}
	return out
}

// Ranges are every peer's addresses: what nodes route to the gateway.
func (p Plan) Ranges() []netip.Prefix {
	var out []netip.Prefix
	for _, peer := range p.Peers {
		out = append(out, peer.Addresses()...)
	}
	return out
}

// WireGuard is the device configuration (applied as a delta of the
// device's state, see delta): one peer per remote cluster,
// allowed to send from (and receiving for) its addresses here. Endpoints
// are resolved by resolve (host names through DNS).
func (p Plan) WireGuard(key wgtypes.Key, port int, resolve func(string) (*net.UDPAddr, error)) (wgtypes.Config, map[string]error) {
	keepAlive := KeepAlive
	cfg := wgtypes.Config{PrivateKey: &key, ListenPort: &port}
	errs := map[string]error{}
	for _, peer := range p.Peers {
		ep, err := resolve(peer.Endpoint)
		if err != nil {
			errs[string(peer.ClusterID)] = err
			continue
		}
		pc := wgtypes.PeerConfig{PublicKey: peer.PublicKey, Endpoint: ep, PersistentKeepaliveInterval: &keepAlive, ReplaceAllowedIPs: true}
		for _, a := range peer.Addresses() {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
		}
		cfg.Peers = append(cfg.Peers, pc)
	}
	return cfg, errs
}
