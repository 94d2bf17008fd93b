package gateway

import (
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// configs are the NetworkConfigs of cluster "home" (pods 10.244.0.0/16,
// API server 10.96.0.1) peered with "eu", whose pods (also 10.244.0.0/16)
// appear here as 10.71.0.0/16 and which sees home's at 10.70.0.0/16.
func configs(t testing.TB, euKey wgtypes.Key) (*ferryv1alpha1.NetworkConfig, ferryv1alpha1.NetworkConfig) {
	t.Helper()
	local := &ferryv1alpha1.NetworkConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "home"},
		Spec: ferryv1alpha1.NetworkConfigSpec{ClusterID: "home", PodCIDR: "10.244.0.0/16",
			APIServer: &ferryv1alpha1.APIServerEndpoint{Address: "10.96.0.1", Port: 443}}}
	peer := ferryv1alpha1.NetworkConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: "eu",
			Labels: map[string]string{ferryv1alpha1.LabelNetworkConfig: ferryv1alpha1.NetworkConfigPeer}},
		Spec: ferryv1alpha1.NetworkConfigSpec{ClusterID: "eu", PodCIDR: "10.244.0.0/16",
			Gateway: &ferryv1alpha1.GatewayEndpoint{Address: "198.19.1.2", Port: 51820, PublicKey: euKey.PublicKey().String(), PodAddress: "10.244.255.250"}},
		Status: ferryv1alpha1.NetworkConfigStatus{
			Conditions:               []metav1.Condition{{Type: ferryv1alpha1.NetworkConfigRemapped, Status: metav1.ConditionTrue, Reason: "Remapped"}},
			RemappedPodCIDR:          "10.71.0.0/16",
			RemappedAPIServerAddress: "10.72.0.1",
			PodCIDRAtPeer:            "10.70.0.0/16",
			APIServerAddressAtPeer:   "10.73.0.9",
		},
	}
	return local, peer
}

func mustKey(t testing.TB) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestPlanFromNetworkConfigs(t *testing.T) {
	euKey := mustKey(t)
	local, eu := configs(t, euKey)
	plan, skipped, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{eu}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 0 || len(plan.Peers) != 1 {
		t.Fatalf("plan %+v, skipped %v", plan, skipped)
	}
	p := plan.Peers[0]
	if p.Endpoint != "198.19.1.2:51820" || p.PublicKey != euKey.PublicKey() {
		t.Errorf("endpoint %s key %s", p.Endpoint, p.PublicKey)
	}
	if got := p.Probe.String(); got != "10.71.255.250" {
		t.Errorf("probe %s, want the peer gateway's pod address as it appears here", got)
	}
	if got := describeRanges(p.Addresses()); got != "10.71.0.0/16,10.72.0.1/32" {
		t.Errorf("addresses %s", got)
	}
	rs := plan.NAT("ferry", "ferry-wg", "ferry-vx")
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	// The filter lets peers reach this cluster's pods and, since eu's
	// ingress leads there, its API server (the kubernetes Service).
	if got := describeRanges(rs.Local); got != "10.244.0.0/16,10.96.0.1/32" || rs.Overlay != "ferry-vx" {
		t.Errorf("filter: local %s, overlay link %q", got, rs.Overlay)
	}
	np := rs.Peers[0]
	if len(np.Egress) != 1 || np.Egress[0].String() != plan.Peers[0].LocalAtPeer.String() {
		t.Errorf("egress %v: want this cluster's pods to where eu sees them", np.Egress)
	}
	// In: where eu sees this cluster's pods and API server, to the real ones.
	var in []string
	for _, m := range np.Ingress {
		in = append(in, m.String())
	}
	if got := strings.Join(in, " "); !strings.Contains(got, "10.70.0.0/16") || !strings.Contains(got, "10.73.0.9/32") {
		t.Errorf("ingress %s", got)
	}
	if rt := plan.TunnelRoutes("ferry-wg"); len(rt) != 2 {
		t.Errorf("tunnel routes %v", rt)
	}
	cfg, errs := plan.WireGuard(mustKey(t), 51820, resolveNumeric)
	if len(errs) != 0 || len(cfg.Peers) != 1 || len(cfg.Peers[0].AllowedIPs) != 2 {
		t.Errorf("wireguard config %+v, errors %v", cfg, errs)
	}
}

func TestPlanSkipsWhatIsNotReady(t *testing.T) {
	local, ready := configs(t, mustKey(t))
	for name, tc := range map[string]struct {
		change func(*ferryv1alpha1.NetworkConfig)
		why    string
	}{
		"not mapped":       {func(nc *ferryv1alpha1.NetworkConfig) { nc.Status.Conditions = nil }, "IPAM has not mapped"},
		"no gateway":       {func(nc *ferryv1alpha1.NetworkConfig) { nc.Spec.Gateway = nil }, "has not published"},
		"no place there":   {func(nc *ferryv1alpha1.NetworkConfig) { nc.Status.PodCIDRAtPeer = "" }, "has not told"},
		"bad key":          {func(nc *ferryv1alpha1.NetworkConfig) { nc.Spec.Gateway.PublicKey = "nope" }, "spec.gateway.publicKey"},
		"size mismatch":    {func(nc *ferryv1alpha1.NetworkConfig) { nc.Status.PodCIDRAtPeer = "10.70.0.0/24" }, "status.podCIDRAtPeer"},
		"bad remapped API": {func(nc *ferryv1alpha1.NetworkConfig) { nc.Status.RemappedAPIServerAddress = "x" }, "status.remappedAPIServerAddress"},
	} {
		t.Run(name, func(t *testing.T) {
			nc := *ready.DeepCopy()
			tc.change(&nc)
			plan, skipped, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{nc}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Peers) != 0 || !strings.Contains(skipped["eu"], tc.why) {
				t.Errorf("peers %v, skipped %q, want %q", plan.Peers, skipped["eu"], tc.why)
			}
		})
	}
}

func TestPlanKeepsOneTunnelPerPeer(t *testing.T) {
	local, sys := configs(t, mustKey(t))
	tenant := *sys.DeepCopy()
	tenant.Namespace = "ferry-tenant-eu"
	tenant.Status.RemappedPodCIDR = "10.99.0.0/16"
	plan, _, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{tenant, sys}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Peers) != 1 || plan.Peers[0].Pods.To.String() != "10.71.0.0/16" {
		t.Errorf("peers %+v: want one, from ferry-system", plan.Peers)
	}
}

func TestPlanSwitchesRotatedKeysAtTheAnnouncedTime(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	local, eu := configs(t, oldKey)
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	eu.Spec.Gateway.NextPublicKey, eu.Spec.Gateway.RotateAt = newKey.PublicKey().String(), &metav1.Time{Time: at}
	before, _, _ := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{eu}, at.Add(-time.Second))
	if before.Peers[0].PublicKey != oldKey.PublicKey() || !before.NextChange.Equal(at) {
		t.Errorf("before the rotation: key %s, next change %s", before.Peers[0].PublicKey, before.NextChange)
	}
	after, _, _ := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{eu}, at)
	if after.Peers[0].PublicKey != newKey.PublicKey() || !after.NextChange.IsZero() {
		t.Errorf("at the rotation: key %s, next change %s", after.Peers[0].PublicKey, after.NextChange)
	}
}

func TestPlanRejectsABadLocalConfig(t *testing.T) {
	local, _ := configs(t, mustKey(t))
	local.Spec.PodCIDR = "10.244.1.0/16"
	if _, _, err := FromNetworkConfigs(local, nil, time.Now()); err == nil || !strings.Contains(err.Error(), "spec.podCIDR") {
		t.Errorf("err = %v, want one naming spec.podCIDR", err)
	}
}

func TestSameTunnelIgnoresJitter(t *testing.T) {
	d := func(us int) *ferryv1alpha1.TunnelStatus {
		return &ferryv1alpha1.TunnelStatus{Endpoint: "e", RoundTripTime: &metav1.Duration{Duration: time.Duration(us) * time.Microsecond}}
	}
	if !sameTunnel(d(1000), d(1100)) || sameTunnel(d(1000), d(1500)) || sameTunnel(d(1000), nil) {
		t.Error("round trips within a fifth are the same, further apart not")
	}
}

func TestDeltaChangesOnlyWhatDiffers(t *testing.T) {
	key, peer, gone := mustKey(t), mustKey(t), mustKey(t)
	port, keep := 51820, KeepAlive
	ep := &net.UDPAddr{IP: net.IPv4(198, 19, 1, 2), Port: 51820}
	allowed := []net.IPNet{{IP: net.IPv4(10, 71, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}}
	want := wgtypes.Config{PrivateKey: &key, ListenPort: &port, Peers: []wgtypes.PeerConfig{{PublicKey: peer.PublicKey(), Endpoint: ep,
		PersistentKeepaliveInterval: &keep, AllowedIPs: allowed}}}
	cur := &wgtypes.Device{PrivateKey: key, ListenPort: port, Peers: []wgtypes.Peer{
		{PublicKey: peer.PublicKey(), Endpoint: ep, PersistentKeepaliveInterval: keep, AllowedIPs: allowed},
	}}
	if d, ok := delta(cur, want); ok {
		t.Errorf("no change wanted, got %+v", d)
	}
	cur.Peers = append(cur.Peers, wgtypes.Peer{PublicKey: gone.PublicKey()})
	cur.Peers[0].Endpoint = &net.UDPAddr{IP: net.IPv4(198, 19, 9, 9), Port: 51820}
	d, ok := delta(cur, want)
	if !ok || d.PrivateKey != nil || d.ListenPort != nil || len(d.Peers) != 2 || d.Peers[0].PublicKey != peer.PublicKey() || !d.Peers[1].Remove {
		t.Errorf("delta %+v: want the moved peer updated and the other removed, nothing else", d)
	}
}

func resolveNumeric(s string) (*net.UDPAddr, error) { return net.ResolveUDPAddr("udp", s) }

// FuzzPlanFromNetworkConfigs feeds a peer's NetworkConfig, which another
// cluster writes, with any strings: the plan never panics, and a peer it
// keeps has mappings of equal sizes and a valid key.
func FuzzPlanFromNetworkConfigs(f *testing.F) {
	f.Add("10.244.0.0/16", "10.71.0.0/16", "10.70.0.0/16", "10.72.0.1", "10.73.0.9", "198.19.1.2", int32(51820), "10.244.255.250")
	f.Add("fd00::/64", "10.71.0.0/16", "10.70.0.0/24", "x", "", "gw.example.com", int32(0), "::1")
	f.Fuzz(func(t *testing.T, pod, remapped, atPeer, api, apiAtPeer, addr string, port int32, podAddr string) {
		key := wgtypes.Key{1}
		local, peer := configs(t, key)
		peer.Spec.PodCIDR, peer.Status.RemappedPodCIDR, peer.Status.PodCIDRAtPeer = pod, remapped, atPeer
		peer.Status.RemappedAPIServerAddress, peer.Status.APIServerAddressAtPeer = api, apiAtPeer
		peer.Spec.Gateway.Address, peer.Spec.Gateway.Port, peer.Spec.Gateway.PodAddress = addr, port, podAddr
		plan, skipped, err := FromNetworkConfigs(local, []ferryv1alpha1.NetworkConfig{peer}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Peers)+len(skipped) != 1 {
			t.Fatalf("the peer is neither planned nor skipped: %+v %v", plan, skipped)
		}
		for _, p := range plan.Peers {
			if p.Pods.From.Bits() != p.Pods.To.Bits() || p.LocalAtPeer.From.Bits() != p.LocalAtPeer.To.Bits() {
				t.Fatalf("mappings of unequal sizes: %+v", p)
			}
			if err := plan.NAT("ferry", "ferry-wg", "ferry-vx").Validate(); err != nil && p.Pods.To.Addr().Is4() == p.LocalAtPeer.To.Addr().Is4() {
				t.Fatalf("a planned peer gives an invalid ruleset: %v", err)
			}
		}
	})
}
