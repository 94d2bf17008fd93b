package gateway

import (
	"net"
	"slices"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// delta is the change that takes the device from cur to want, or false
// when there is none. Applying the whole configuration each time
// (ReplacePeers) would drop every peer's session and rebind the UDP port:
// a new handshake, and a pause of the flows, every resync. Peers are
// changed only when their endpoint, allowed IPs or keepalive differ, and
// removed when no longer wanted.
func delta(cur *wgtypes.Device, want wgtypes.Config) (wgtypes.Config, bool) {
	if cur == nil {
		return want, true
	}
	out := wgtypes.Config{}
	changed := false
	if want.PrivateKey != nil && *want.PrivateKey != cur.PrivateKey {
		out.PrivateKey, changed = want.PrivateKey, true
	}
	if want.ListenPort != nil && *want.ListenPort != cur.ListenPort {
		out.ListenPort, changed = want.ListenPort, true
	}
	have := map[wgtypes.Key]wgtypes.Peer{}
	for _, p := range cur.Peers {
		have[p.PublicKey] = p
	}
	wanted := map[wgtypes.Key]bool{}
	for _, p := range want.Peers {
		wanted[p.PublicKey] = true
		if h, ok := have[p.PublicKey]; ok && samePeer(h, p) {
			continue
		}
		out.Peers, changed = append(out.Peers, p), true
	}
	for _, p := range cur.Peers {
		if !wanted[p.PublicKey] {
			out.Peers, changed = append(out.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true}), true
		}
	}
	return out, changed
}

func samePeer(h wgtypes.Peer, p wgtypes.PeerConfig) bool {
	if p.Endpoint != nil && (h.Endpoint == nil || h.Endpoint.String() != p.Endpoint.String()) {
		return false
	}
	if p.PersistentKeepaliveInterval != nil && *p.PersistentKeepaliveInterval != h.PersistentKeepaliveInterval {
		return false
	}
	return slices.Equal(ipNets(h.AllowedIPs), ipNets(p.AllowedIPs))
}

func ipNets(ns []net.IPNet) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.String()
	}
	slices.SortFunc(out, strings.Compare)
	return out
}

// followEndpoints adjusts want, the plan's device configuration, to the
// endpoints the plan gave before (last: peer key → endpoint, updated):
//
//   - a peer whose published endpoint is unchanged keeps the device's
//     endpoint, which WireGuard moves to wherever the peer's authenticated
//     packets come from (roaming): a peer gateway that failed over reaches
//     this one from its new address long before its NetworkConfig does;
//   - a peer whose published endpoint changed (it failed over, or moved)
//     is replaced, which drops the session to the old address and sends a
//     handshake to the new one at once: without it, data would go on under
//     the old session, which the new peer replica cannot read, until
//     WireGuard's 15-second timeout.
func followEndpoints(cur *wgtypes.Device, want wgtypes.Config, last map[wgtypes.Key]string) wgtypes.Config {
	have := map[wgtypes.Key]bool{}
	if cur != nil {
		for _, p := range cur.Peers {
			have[p.PublicKey] = true
		}
	}
	out := want
	out.Peers = nil
	for _, p := range want.Peers {
		ep := ""
		if p.Endpoint != nil {
			ep = p.Endpoint.String()
		}
		prev, known := last[p.PublicKey]
		switch {
		case !have[p.PublicKey] || !known:
		case prev == ep:
			p.Endpoint = nil // the device's, roamed or not
		default:
			out.Peers = append(out.Peers, wgtypes.PeerConfig{PublicKey: p.PublicKey, Remove: true})
		}
		last[p.PublicKey] = ep
		out.Peers = append(out.Peers, p)
	}
	for k := range last {
		if !slices.ContainsFunc(want.Peers, func(p wgtypes.PeerConfig) bool { return p.PublicKey == k }) {
			delete(last, k)
		}
	}
	return out
}
