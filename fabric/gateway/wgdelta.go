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
