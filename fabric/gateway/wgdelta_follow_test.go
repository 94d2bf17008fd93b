package gateway

import (
	"net"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

func TestFollowEndpoints(t *testing.T) {
	k, _ := wgtypes.GeneratePrivateKey()
	peer := k.PublicKey()
	published := &net.UDPAddr{IP: net.IPv4(198, 19, 1, 2), Port: 51820}
	roamed := &net.UDPAddr{IP: net.IPv4(198, 19, 1, 3), Port: 51820}
	moved := &net.UDPAddr{IP: net.IPv4(198, 19, 1, 4), Port: 51820}
	want := func(ep *net.UDPAddr) wgtypes.Config {
		return wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: peer, Endpoint: ep}}}
	}
	last := map[wgtypes.Key]string{}

	// A new peer gets the published endpoint.
	got := followEndpoints(&wgtypes.Device{}, want(published), last)
	if len(got.Peers) != 1 || got.Peers[0].Endpoint.String() != published.String() {
		t.Fatalf("new peer: %+v", got.Peers)
	}
	// The peer roamed; its published endpoint is the same: keep the
	// device's, so delta changes nothing.
	dev := &wgtypes.Device{Peers: []wgtypes.Peer{{PublicKey: peer, Endpoint: roamed}}}
	got = followEndpoints(dev, want(published), last)
	if change, ok := delta(dev, got); ok {
		t.Fatalf("a roamed endpoint was reset to the published one: %+v", change.Peers)
	}
	// A new endpoint published: the peer is replaced (a fresh handshake to it).
	got = followEndpoints(dev, want(moved), last)
	if len(got.Peers) != 2 || !got.Peers[0].Remove || got.Peers[1].Remove || got.Peers[1].Endpoint.String() != moved.String() {
		t.Fatalf("moved peer: %+v", got.Peers)
	}
	// A peer no longer planned is forgotten.
	followEndpoints(dev, wgtypes.Config{}, last)
	if len(last) != 0 {
		t.Fatalf("last endpoints kept %v", last)
	}
}
