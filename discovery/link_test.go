package discovery

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/miekg/dns"

	"github.com/ferry-io/ferry/discovery/discoverytest"
)

// TestBrowseLinkFindsResponders runs three responders in a namespace at the
// other end of a veth: a good cluster, one whose TXT record has a bad
// fingerprint, one under another service type; the browser finds the first,
// skips the second naming the field, ignores the third.
func TestBrowseLinkFindsResponders(t *testing.T) {
	link := discoverytest.NewLink(t)
	good := Advertisement{ClusterID: "edge-1", Server: "https://" + link.RemoteAddr.String() + ":6443", CAFingerprint: testFingerprint, Version: "v1"}
	bad, err := Advertisement{ClusterID: "edge-2", Server: "https://api.edge-2.example.org:6443", CAFingerprint: testFingerprint, Addresses: []netip.Addr{link.RemoteAddr}}.Records(LinkDomain, 120)
	if err != nil {
		t.Fatal(err)
	}
	bad[2].(*dns.TXT).Txt = []string{"txtvers=1", "id=edge-2", "ca=sha256:beef"}
	other, err := dns.NewRR("_http._tcp.local. 120 IN PTR web._http._tcp.local.")
	if err != nil {
		t.Fatal(err)
	}
	err = link.InRemote(func() error {
		r, err := NewResponder(link.Remote, good, testr.NewWithOptions(t, testr.Options{Verbosity: 1}))
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = r.Close() })
		for _, rrs := range [][]dns.RR{bad, {other}} {
			r, err := serveRecords(link.Remote, rrs, testr.NewWithOptions(t, testr.Options{Verbosity: 1}))
			if err != nil {
				return err
			}
			t.Cleanup(func() { _ = r.Close() })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := LinkBrowser{Interface: link.Local, Timeout: time.Second, Log: testr.NewWithOptions(t, testr.Options{Verbosity: 1})}.Browse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := Cluster{Instance: "edge-1", ClusterID: "edge-1", Endpoint: "https://192.0.2.2:6443", CAFingerprint: testFingerprint, Version: "v1"}
	if len(res.Clusters) != 1 || res.Clusters[0] != want {
		t.Errorf("found %+v, want only %+v", res.Clusters, want)
	}
	if skipped := joinErrors(res.Skipped); len(res.Skipped) != 1 || !strings.Contains(skipped, `instance "edge-2": TXT ca: "sha256:beef"`) {
		t.Errorf("skipped %q, want edge-2 for its ca key", skipped)
	}
}

// TestBrowseLinkWithoutResponders: nobody answers, nothing is found, and
// the browse ends after its timeout.
func TestBrowseLinkWithoutResponders(t *testing.T) {
	link := discoverytest.NewLink(t)
	start := time.Now()
	res, err := LinkBrowser{Interface: link.Local, Timeout: 300 * time.Millisecond}.Browse(context.Background())
	if err != nil || len(res.Clusters)+len(res.Skipped) != 0 {
		t.Errorf("Browse = %+v, %v; want nothing", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Browse took %s, want about its 300ms timeout", d)
	}
}
