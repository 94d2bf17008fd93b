package discovery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ferry-io/ferry/discovery/discoverytest"
)

// zone is example.org's ferry instances: a and b are good, bad has a TXT
// record without its cluster ID, gone has no SRV record.
func zone(t *testing.T) []dns.RR {
	t.Helper()
	var rrs []dns.RR
	for _, id := range []string{"a", "b"} {
		ad := Advertisement{ClusterID: id, Server: "https://api." + id + ".example.org:6443", CAFingerprint: testFingerprint, Version: "v1"}
		r, err := ad.Records("example.org", 60)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, r...)
	}
	for _, s := range []string{
		"_ferry._tcp.example.org. 60 IN PTR bad._ferry._tcp.example.org.",
		"bad._ferry._tcp.example.org. 60 IN SRV 0 0 6443 api.bad.example.org.",
		`bad._ferry._tcp.example.org. 60 IN TXT "txtvers=1" "ca=` + testFingerprint + `"`,
		"_ferry._tcp.example.org. 60 IN PTR gone._ferry._tcp.example.org.",
		`gone._ferry._tcp.example.org. 60 IN TXT "txtvers=1" "id=gone" "ca=` + testFingerprint + `"`,
	} {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

func TestBrowseDomainFindsGoodInstancesAndSkipsBadOnes(t *testing.T) {
	for _, extras := range []bool{true, false} {
		server := discoverytest.ServeZone(t, zone(t), extras)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := DNSBrowser{Server: server, Timeout: 2 * time.Second}.Browse(ctx, "example.org")
		if err != nil {
			t.Fatal(err)
		}
		want := []Cluster{
			{Instance: "a", ClusterID: "a", Endpoint: "https://api.a.example.org:6443", CAFingerprint: testFingerprint, Version: "v1"},
			{Instance: "b", ClusterID: "b", Endpoint: "https://api.b.example.org:6443", CAFingerprint: testFingerprint, Version: "v1"},
		}
		if len(res.Clusters) != len(want) || res.Clusters[0] != want[0] || res.Clusters[1] != want[1] {
			t.Errorf("extras=%v: found %+v, want %+v", extras, res.Clusters, want)
		}
		skipped := joinErrors(res.Skipped)
		for _, w := range []string{`instance "bad": TXT id: missing`, `instance "gone._ferry._tcp.example.org.": no SRV record`} {
			if !strings.Contains(skipped, w) {
				t.Errorf("extras=%v: skipped %q, want it to say %q", extras, skipped, w)
			}
		}
		if len(res.Skipped) != 2 {
			t.Errorf("extras=%v: skipped %d instances, want 2: %s", extras, len(res.Skipped), skipped)
		}
	}
}

func TestBrowseDomainWithoutInstancesFindsNone(t *testing.T) {
	server := discoverytest.ServeZone(t, zone(t), true)
	res, err := DNSBrowser{Server: server, Timeout: 2 * time.Second}.Browse(context.Background(), "example.net")
	if err != nil || len(res.Clusters) != 0 || len(res.Skipped) != 0 {
		t.Errorf("Browse(example.net) = %+v, %v; want nothing found, no error", res, err)
	}
}

func TestBrowseDomainNamesTheUnreachableServer(t *testing.T) {
	// A UDP port nobody answers on: the query times out.
	server := discoverytest.ServeZone(t, nil, false)
	_, err := DNSBrowser{Server: strings.Replace(server, "127.0.0.1", "127.0.0.2", 1), Timeout: 200 * time.Millisecond}.Browse(context.Background(), "example.org")
	if err == nil || !strings.Contains(err.Error(), "PTR _ferry._tcp.example.org.") {
		t.Errorf("Browse through a silent server = %v, want an error naming the query", err)
	}
	if _, err := (DNSBrowser{Server: server}).Browse(context.Background(), "bad..name"); err == nil || !strings.Contains(err.Error(), `domain "bad..name"`) {
		t.Errorf("Browse(bad..name) = %v, want an error naming the domain", err)
	}
}

func joinErrors(errs []error) string {
	var s []string
	for _, err := range errs {
		s = append(s, err.Error())
	}
	return strings.Join(s, "; ")
}

func TestInstanceRRsPicksTheLowestPrioritySRV(t *testing.T) {
	var rrs []dns.RR
	for _, s := range []string{
		"a.example.org. 60 IN SRV 10 0 1 backup.example.org.",
		"a.example.org. 60 IN SRV 0 1 2 light.example.org.",
		"a.example.org. 60 IN SRV 0 5 3 heavy.example.org.",
		"b.example.org. 60 IN SRV 0 0 4 other.example.org.",
	} {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, rr)
	}
	if srv, _ := instanceRRs("a.example.org.", rrs); srv == nil || srv.Target != "heavy.example.org." {
		t.Errorf("picked %v, want heavy.example.org. (priority 0, weight 5)", srv)
	}
}
