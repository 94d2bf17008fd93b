package fabric

import (
	"errors"
	"maps"
	"net/netip"
	"strings"
	"testing"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/ipam"
)

var (
	testPool  = []netip.Prefix{netip.MustParsePrefix("10.64.0.0/11")}
	testLocal = localNetwork{
		podCIDR:     netip.MustParsePrefix("10.244.0.0/16"),
		serviceCIDR: netip.MustParsePrefix("10.96.0.0/12"),
		nodeIPs:     []netip.Addr{netip.MustParseAddr("192.168.1.10")},
	}
)

func peer(id, pods, external, api string) peerNetwork {
	p := peerNetwork{id: ferryv1alpha1.ClusterID(id), podCIDR: netip.MustParsePrefix(pods)}
	if external != "" {
		p.externalCIDR = netip.MustParsePrefix(external)
	}
	if api != "" {
		p.apiServer = netip.MustParseAddr(api)
	}
	return p
}

func TestPlanMapsOverlappingPeersApart(t *testing.T) {
	peers := []peerNetwork{
		peer("eu", "10.244.0.0/16", "10.64.0.0/16", "10.96.0.1"), // same defaults as this cluster
		peer("us", "10.244.0.0/16", "10.64.0.0/16", "10.96.0.1"),
		peer("lab", "172.20.0.0/16", "", ""), // no overlap: kept
	}
	res, err := plan(nil, testLocal, peers, testPool)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		keyExternal: "10.64.0.0/16", "pods/eu": "10.65.0.0/16", "pods/us": "10.66.0.0/16", "pods/lab": "172.20.0.0/16",
		"apiserver/eu": "10.67.0.0/32", "apiserver/us": "10.67.0.1/32",
	}
	for k, v := range want {
		if got := res.holders[k]; got.String() != v {
			t.Errorf("%s = %s, want %s (all: %v)", k, got, v, res.holders)
		}
	}
	if len(res.holders) != len(want) {
		t.Errorf("holders %v, want %v", res.holders, want)
	}
	if m := res.peers["lab"]; !strings.Contains(m.why, "keep their addresses") {
		t.Errorf("lab: %q", m.why)
	}
	if m := res.peers["eu"]; !strings.Contains(m.why, "overlaps this cluster's pod CIDR") {
		t.Errorf("eu: %q", m.why)
	}

	// Restart: the stored table gives the same answer, whatever the order
	// the peers come in; a new peer gets the next free range.
	again, err := plan(res.holders, testLocal, append([]peerNetwork{peer("asia", "10.244.0.0/16", "", "")}, peers[2], peers[1], peers[0]), testPool)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range res.holders {
		if again.holders[k] != v {
			t.Errorf("after restart %s = %s, want %s", k, again.holders[k], v)
		}
	}
	if got := again.holders["pods/asia"].String(); got != "10.68.0.0/16" {
		t.Errorf("new peer asia got %s", got)
	}

	// Unpeering us releases its ranges; they are handed out again.
	left, _ := plan(again.holders, testLocal, []peerNetwork{peers[0], peers[2]}, testPool)
	if _, ok := left.holders["pods/us"]; ok {
		t.Errorf("pods/us not released: %v", left.holders)
	}
	if _, ok := left.holders["pods/asia"]; ok {
		t.Errorf("pods/asia not released: %v", left.holders)
	}
}

func TestPlanUsesThePeersExternalCIDRWhenFree(t *testing.T) {
	res, err := plan(nil, testLocal, []peerNetwork{peer("eu", "10.244.0.0/16", "10.80.0.0/16", "")}, testPool)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.peers["eu"].podCIDR.String(); got != "10.80.0.0/16" {
		t.Errorf("eu mapped to %s, want its external CIDR", got)
	}
	if !strings.Contains(res.peers["eu"].why, "external CIDR") {
		t.Errorf("why: %q", res.peers["eu"].why)
	}
}

func TestPlanDropsStoredEntriesThatNoLongerFit(t *testing.T) {
	stored := map[string]netip.Prefix{
		keyExternal: netip.MustParsePrefix("10.64.0.0/24"),  // wrong size now
		"pods/eu":   netip.MustParsePrefix("10.244.0.0/16"), // overlaps this cluster now
		"pods/gone": netip.MustParsePrefix("10.70.0.0/16"),  // peer gone
		"weird":     netip.MustParsePrefix("10.71.0.0/16"),  // unknown key
	}
	res, err := plan(stored, testLocal, []peerNetwork{peer("eu", "10.244.0.0/16", "", "")}, testPool)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{keyExternal: "10.64.0.0/16", "pods/eu": "10.65.0.0/16"}
	if len(res.holders) != len(want) {
		t.Fatalf("holders %v, want %v", res.holders, want)
	}
	for k, v := range want {
		if res.holders[k].String() != v {
			t.Errorf("%s = %s, want %s", k, res.holders[k], v)
		}
	}
}

func TestPlanErrorsNameTheField(t *testing.T) {
	_, err := plan(nil, testLocal, nil, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/11")})
	if !errors.Is(err, errPoolConfig) || !strings.Contains(err.Error(), "--ipam-pool 10.96.0.0/11 overlaps this cluster's service CIDR") {
		t.Errorf("pool over the service CIDR: %v", err)
	}
	// A pool with room for the external CIDR only.
	res, err := plan(nil, testLocal, []peerNetwork{peer("eu", "10.244.0.0/16", "", "")}, []netip.Prefix{netip.MustParsePrefix("10.64.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.peers["eu"]; !errors.Is(m.err, ipam.ErrPoolExhausted) || !strings.Contains(m.err.Error(), "10.244.0.0/16") || !strings.Contains(m.err.Error(), "--ipam-pool") {
		t.Errorf("exhausted pool: %v", m.err)
	}
}

func TestOptionsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		flag string
	}{
		{Options{PodCIDR: "10.244.0.1/16"}, "--pod-cidr"},
		{Options{ServiceCIDR: "ten"}, "--service-cidr"},
		{Options{Pool: []string{"10.64.0.0"}}, "--ipam-pool"},
		{Options{Reserved: []string{"x"}}, "--ipam-reserved"},
		{Options{Reserved: []string{"10.64.0.0/16"}}, "--ipam-pool 10.64.0.0/11 overlaps --ipam-reserved"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.o, err, tc.flag)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// FuzzPlan maps random peers against random local networks and checks the
// IPAM's promises: no two holders overlap, none overlaps a local range,
// every peer is mapped to a range of its own size, a restart (the stored
// table fed back) changes nothing, and removing peers releases exactly
// their entries.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{10, 244, 16, 10, 96, 12, 3, 10, 244, 16, 10, 244, 16, 172, 20, 16}, uint8(11))
	f.Add([]byte{10, 64, 16, 10, 65, 16, 4, 10, 64, 16, 10, 66, 24, 10, 64, 8, 10, 70, 32}, uint8(12))
	f.Fuzz(func(t *testing.T, b []byte, poolBits uint8) {
		next := func() (netip.Prefix, bool) {
			if len(b) < 3 {
				return netip.Prefix{}, false
			}
			bits := 8 + int(b[2])%25 // /8 to /32
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{b[0], b[1], 0, 0}), bits).Masked()
			b = b[3:]
			return p, true
		}
		pods, ok1 := next()
		services, ok2 := next()
		if !ok1 || !ok2 || len(b) < 1 {
			return
		}
		n := int(b[0]) % 6
		b = b[1:]
		local := localNetwork{podCIDR: pods, serviceCIDR: services}
		var peers []peerNetwork
		for i := range n {
			p, ok := next()
			if !ok {
				break
			}
			peers = append(peers, peerNetwork{id: ferryv1alpha1.ClusterID(string(rune('a' + i))), podCIDR: p,
				apiServer: netip.AddrFrom4([4]byte{10, 96, 0, byte(i)})})
		}
		pool := []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("10.64.0.0"), 8+int(poolBits)%8).Masked()}
		res, err := plan(nil, local, peers, pool)
		if err != nil {
			return // the pool overlaps a local range: refused as a whole
		}
		check := func(res planResult) {
			keys := make([]string, 0, len(res.holders))
			for k := range res.holders {
				keys = append(keys, k)
			}
			for i, k := range keys {
				for _, r := range local.ranges() {
					if res.holders[k].Overlaps(r.prefix) {
						t.Fatalf("%s = %s overlaps %s %s", k, res.holders[k], r.name, r.prefix)
					}
				}
				for _, k2 := range keys[i+1:] {
					if res.holders[k].Overlaps(res.holders[k2]) {
						t.Fatalf("%s = %s overlaps %s = %s", k, res.holders[k], k2, res.holders[k2])
					}
				}
			}
			for id, m := range res.peers {
				if m.err == nil && m.podCIDR.Bits() != peersByID(peers)[id].podCIDR.Bits() {
					t.Fatalf("peer %s: %s mapped to %s", id, peersByID(peers)[id].podCIDR, m.podCIDR)
				}
			}
		}
		check(res)
		again, err := plan(res.holders, local, peers, pool)
		if err != nil || !maps.Equal(again.holders, res.holders) {
			t.Fatalf("restart changed %v into %v (%v)", res.holders, again.holders, err)
		}
		if len(peers) == 0 {
			return
		}
		kept := peers[:len(peers)/2]
		less, _ := plan(res.holders, local, kept, pool)
		check(less)
		for k, p := range less.holders {
			if held, ok := res.holders[k]; ok && held != p {
				t.Fatalf("removing peers moved %s from %s to %s", k, held, p)
			}
			// Only what the full pool could not hold may appear.
			id := ferryv1alpha1.ClusterID(strings.TrimPrefix(strings.TrimPrefix(k, keyPodsPrefix), keyAPIServerPref))
			if _, ok := res.holders[k]; !ok && res.peers[id].err == nil {
				t.Fatalf("removing peers added %s = %s", k, p)
			}
		}
		for _, gone := range peers[len(peers)/2:] {
			if _, ok := less.holders[podsKey(gone.id)]; ok {
				t.Fatalf("peer %s removed but its range is still held", gone.id)
			}
		}
	})
}

func peersByID(ps []peerNetwork) map[ferryv1alpha1.ClusterID]peerNetwork {
	out := map[ferryv1alpha1.ClusterID]peerNetwork{}
	for _, p := range ps {
		out[p.id] = p
	}
	return out
}

func TestPlanSpreadsExternalCIDRsByClusterID(t *testing.T) {
	external := map[ferryv1alpha1.ClusterID]netip.Prefix{}
	for _, id := range []ferryv1alpha1.ClusterID{"consumer", "eu", "us", "provider"} {
		l := testLocal
		l.clusterID = id
		res, err := plan(nil, l, nil, testPool)
		if err != nil || res.externalErr != nil {
			t.Fatal(err, res.externalErr)
		}
		if !testPool[0].Contains(res.external.Addr()) || res.external.Bits() != 16 {
			t.Fatalf("%s: external %s", id, res.external)
		}
		external[id] = res.external
		// Taken already: the next free block.
		stored := map[string]netip.Prefix{"pods/x": res.external}
		busy, _ := plan(stored, l, []peerNetwork{peer("x", res.external.String(), "", "")}, testPool)
		if busy.external == res.external || !busy.external.IsValid() {
			t.Fatalf("%s: external %s while a peer holds it", id, busy.external)
		}
	}
	seen := map[netip.Prefix]bool{}
	for _, p := range external {
		seen[p] = true
	}
	if len(seen) < 3 {
		t.Errorf("four cluster IDs share %d external CIDRs: %v", len(seen), external)
	}
}
