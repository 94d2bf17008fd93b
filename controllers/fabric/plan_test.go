package fabric

import (
	"errors"
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
	if m := res.peers["eu"]; !errors.Is(m.err, ipam.ErrPoolExhausted) || !strings.Contains(m.err.Error(), "10.244.0.0/16") {
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

func TestCovering(t *testing.T) {
	got := covering([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("10.244.7.0/24"), netip.MustParsePrefix("10.244.2.0/24")})
	if got.String() != "10.244.0.0/21" {
		t.Errorf("covering = %s", got)
	}
}
