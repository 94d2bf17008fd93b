package nat

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables/expr"

	"github.com/ferry-io/ferry/fabric"
)

func mapping(from, to string) fabric.Mapping {
	return fabric.Mapping{From: netip.MustParsePrefix(from), To: netip.MustParsePrefix(to)}
}

func prefixes(ps ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

// validRuleset is a dual-stack ruleset with two peers that Validate
// accepts; the test cases break one thing each.
func validRuleset() Ruleset {
	return Ruleset{
		Table:    "ferry",
		Tunnel:   "wg0",
		ClampMSS: true,
		Peers: []Peer{
			{
				Name:      "east",
				Addresses: prefixes("10.71.0.0/16", "192.0.2.10/32", "fd71::/64"),
				Ingress:   []fabric.Mapping{mapping("10.72.0.0/16", "10.244.0.0/16"), mapping("fd72::/64", "fd44::/64")},
				Egress:    []fabric.Mapping{mapping("10.244.0.0/16", "10.72.0.0/16"), mapping("fd44::/64", "fd72::/64")},
			},
			{
				Name:      "west-2",
				Addresses: prefixes("10.73.0.0/16"),
				Ingress:   []fabric.Mapping{mapping("10.74.0.0/16", "10.244.0.0/16")},
				Egress:    []fabric.Mapping{mapping("10.244.0.0/16", "10.74.0.0/16")},
			},
		},
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(rs *Ruleset)
		want   []string // substrings of the error; none: valid
	}{
		{name: "valid", change: func(*Ruleset) {}},
		{name: "no peers", change: func(rs *Ruleset) { rs.Peers = nil }},
		{name: "identity mapping", change: func(rs *Ruleset) {
			rs.Peers[1].Egress[0] = mapping("10.244.0.0/16", "10.244.0.0/16")
		}},
		{name: "zero-length prefixes", change: func(rs *Ruleset) {
			rs.Peers = []Peer{{Name: "all", Addresses: prefixes("0.0.0.0/0"), Egress: []fabric.Mapping{mapping("0.0.0.0/0", "0.0.0.0/0")}}}
		}},

		{name: "empty table", change: func(rs *Ruleset) { rs.Table = "" },
			want: []string{"Table is empty"}},
		{name: "long table", change: func(rs *Ruleset) { rs.Table = strings.Repeat("t", 256) },
			want: []string{"Table", "longer than 255 bytes"}},
		{name: "control character in table", change: func(rs *Ruleset) { rs.Table = "fer\nry" },
			want: []string{`Table "fer\nry": control characters`}},
		{name: "empty tunnel", change: func(rs *Ruleset) { rs.Tunnel = "" },
			want: []string{"Tunnel is empty"}},
		{name: "long tunnel", change: func(rs *Ruleset) { rs.Tunnel = "wireguard-tunnel0" },
			want: []string{`Tunnel "wireguard-tunnel0": longer than 15 bytes`}},
		{name: "slash in tunnel", change: func(rs *Ruleset) { rs.Tunnel = "wg/0" },
			want: []string{`Tunnel "wg/0"`}},
		{name: "space in tunnel", change: func(rs *Ruleset) { rs.Tunnel = "wg 0" },
			want: []string{`Tunnel "wg 0"`}},

		{name: "empty peer name", change: func(rs *Ruleset) { rs.Peers[1].Name = "" },
			want: []string{"Peers[1].Name is empty"}},
		{name: "upper case peer name", change: func(rs *Ruleset) { rs.Peers[0].Name = "East" },
			want: []string{`Peers[0].Name "East": not a DNS label`}},
		{name: "peer name ending in a dash", change: func(rs *Ruleset) { rs.Peers[0].Name = "east-" },
			want: []string{`Peers[0].Name "east-": not a DNS label`}},
		{name: "long peer name", change: func(rs *Ruleset) { rs.Peers[0].Name = strings.Repeat("e", 64) },
			want: []string{"Peers[0].Name", "longer than 63 characters"}},
		{name: "duplicate peer names", change: func(rs *Ruleset) { rs.Peers[1].Name = "east" },
			want: []string{`Peers[1].Name "east": Peers[0] has the same name`}},

		{name: "no addresses", change: func(rs *Ruleset) {
			rs.Peers[1].Addresses = nil
			rs.Peers[1].Ingress, rs.Peers[1].Egress = nil, nil
		}, want: []string{"Peers[1].Addresses is empty"}},
		{name: "invalid address", change: func(rs *Ruleset) { rs.Peers[0].Addresses[1] = netip.Prefix{} },
			want: []string{"Peers[0].Addresses[1] is not a valid prefix"}},
		{name: "address with host bits", change: func(rs *Ruleset) { rs.Peers[0].Addresses[0] = netip.MustParsePrefix("10.71.0.1/16") },
			want: []string{"Peers[0].Addresses[0] 10.71.0.1/16: host bits set (the network is 10.71.0.0/16)"}},
		{name: "IPv4-mapped address", change: func(rs *Ruleset) { rs.Peers[0].Addresses[1] = netip.MustParsePrefix("::ffff:192.0.2.10/128") },
			want: []string{"Peers[0].Addresses[1] ::ffff:192.0.2.10/128: an IPv4-mapped IPv6 prefix"}},
		{name: "addresses overlapping between peers", change: func(rs *Ruleset) { rs.Peers[1].Addresses = prefixes("10.71.128.0/17") },
			want: []string{"Peers[1].Addresses[0] 10.71.128.0/17 overlaps Peers[0].Addresses[0] 10.71.0.0/16"}},
		{name: "addresses overlapping in a peer", change: func(rs *Ruleset) { rs.Peers[0].Addresses[1] = netip.MustParsePrefix("10.71.3.0/24") },
			want: []string{"Peers[0].Addresses[1] 10.71.3.0/24 overlaps Peers[0].Addresses[0] 10.71.0.0/16"}},

		{name: "mapping of different lengths", change: func(rs *Ruleset) { rs.Peers[0].Ingress[0] = mapping("10.72.0.0/16", "10.244.0.0/17") },
			want: []string{"Peers[0].Ingress[0]", "different lengths (/16 and /17)"}},
		{name: "mapping of different families", change: func(rs *Ruleset) { rs.Peers[1].Egress[0] = mapping("10.244.0.0/16", "fd72::/16") },
			want: []string{"Peers[1].Egress[0]", "different address families"}},
		{name: "mapping with host bits", change: func(rs *Ruleset) { rs.Peers[0].Egress[1] = mapping("fd44::1/64", "fd72::/64") },
			want: []string{"Peers[0].Egress[1] fd44::1/64->fd72::/64: From fd44::1/64: host bits set"}},
		{name: "mapping with an invalid prefix", change: func(rs *Ruleset) { rs.Peers[0].Egress[0].To = netip.Prefix{} },
			want: []string{"Peers[0].Egress[0]", "To is not a valid prefix"}},
		{name: "mapping of a family the peer lacks", change: func(rs *Ruleset) {
			rs.Peers[1].Ingress = append(rs.Peers[1].Ingress, mapping("fd74::/64", "fd44::/64"))
		},
			want: []string{"Peers[1].Ingress[1] fd74::/64->fd44::/64: Peers[1].Addresses has no IPv6 prefix"}},
		{name: "mappings from overlapping prefixes", change: func(rs *Ruleset) {
			rs.Peers[0].Egress = append(rs.Peers[0].Egress, mapping("10.244.1.0/24", "10.75.1.0/24"))
		}, want: []string{"Peers[0].Egress[2] 10.244.1.0/24->10.75.1.0/24: From overlaps that of Peers[0].Egress[0] (10.244.0.0/16)"}},

		{name: "filter", change: func(rs *Ruleset) {
			rs.Local, rs.Overlay = prefixes("10.244.0.0/16", "10.96.0.1/32", "fd44::/64"), "vx0"
		}},
		{name: "filter without an overlay link", change: func(rs *Ruleset) { rs.Local = prefixes("10.244.0.0/16") },
			want: []string{"Overlay is empty (the filter, on with Local, needs it)"}},
		{name: "filter with the tunnel as overlay link", change: func(rs *Ruleset) {
			rs.Local, rs.Overlay = prefixes("10.244.0.0/16"), rs.Tunnel
		}, want: []string{`Overlay "wg0": the same link as Tunnel`}},
		{name: "local prefix with host bits", change: func(rs *Ruleset) {
			rs.Local, rs.Overlay = prefixes("10.244.0.0/16", "10.96.0.1/24"), "vx0"
		}, want: []string{"Local[1] 10.96.0.1/24: host bits set"}},

		{name: "every problem is reported", change: func(rs *Ruleset) {
			rs.Table, rs.Tunnel = "", ""
			rs.Peers[1].Name = "east"
		}, want: []string{"Table is empty", "Tunnel is empty", "Peers[1].Name \"east\": Peers[0] has the same name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := validRuleset()
			tc.change(&rs)
			err := rs.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: no error, want one saying %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %q, want it to say %q", err, w)
				}
			}
		})
	}
}

// TestNoNamespace checks that the functions refuse a nil namespace rather
// than act on whatever namespace the thread is in.
func TestNoNamespace(t *testing.T) {
	if _, err := Apply(nil, validRuleset()); err == nil {
		t.Error("Apply without a namespace: no error")
	}
	if err := Remove(nil, "ferry"); err == nil {
		t.Error("Remove without a namespace: no error")
	}
	if _, err := ReadCounters(nil, "ferry"); err == nil {
		t.Error("ReadCounters without a namespace: no error")
	}
}

// TestBuildRules checks the rules' shape without a kernel: how many go in
// each chain.
func TestBuildRules(t *testing.T) {
	rs := validRuleset()
	chains := buildChains(nil)
	count := map[string]int{}
	for _, r := range buildRules(rs, chains) {
		count[r.Chain.Name]++
		if len(r.UserData) == 0 || len(r.UserData) > 255 {
			t.Errorf("rule in %s: %d bytes of user data", r.Chain.Name, len(r.UserData))
		}
	}
	// east: one IPv4 mapping for each of its two IPv4 addresses, one IPv6
	// mapping for its IPv6 address, each way; west-2: one of each.
	want := map[string]int{
		chainPrerouting:  2 + 1 + 1,
		chainPostrouting: 2 + 1 + 1,
		chainForward:     2 + 2*3 + 2*1, // clamping, then counting
	}
	for chain, n := range want {
		if count[chain] != n {
			t.Errorf("%s: %d rules, want %d", chain, count[chain], n)
		}
	}

	// With the filter: an accept each way for every address of a peer and
	// local prefix of one family, then drops from and to the tunnel and
	// the overlay link, and to and from each local prefix, after a drop
	// each way for every address of a peer (counted for it).
	rs.Local, rs.Overlay = prefixes("10.244.0.0/16", "fd44::/64"), "vx0"
	count = map[string]int{}
	verdicts := map[expr.VerdictKind]int{}
	for _, r := range buildRules(rs, chains) {
		count[r.Chain.Name]++
		for _, e := range r.Exprs {
			if v, ok := e.(*expr.Verdict); ok {
				verdicts[v.Kind]++
			}
		}
	}
	accepts, drops := 2*(3+1), 2*(3+1)+4+2*2
	if n := 2 + accepts + drops; count[chainForward] != n {
		t.Errorf("filtering %s: %d rules, want %d", chainForward, count[chainForward], n)
	}
	if verdicts[expr.VerdictAccept] != accepts || verdicts[expr.VerdictDrop] != drops {
		t.Errorf("verdicts %v, want %d accept and %d drop", verdicts, accepts, drops)
	}
}

func TestLastAddr(t *testing.T) {
	for p, want := range map[string]string{
		"10.244.0.0/16":   "10.244.255.255",
		"10.244.0.0/13":   "10.247.255.255",
		"192.0.2.7/32":    "192.0.2.7",
		"0.0.0.0/0":       "255.255.255.255",
		"fd18:1::/65":     "fd18:1::7fff:ffff:ffff:ffff",
		"fd00::/8":        "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		"2001:db8::1/128": "2001:db8::1",
	} {
		if got := lastAddr(netip.MustParsePrefix(p)); got.String() != want {
			t.Errorf("lastAddr(%s) = %s, want %s", p, got, want)
		}
	}
}
