// Package discoverytest runs what discovery's tests browse: a DNS server
// answering from a zone on 127.0.0.1, and a link to a network namespace
// for multicast DNS responders. Both belong inside the network namespace
// of the test (netlab.Main), so that no packet leaves it.
package discoverytest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	certutil "k8s.io/client-go/util/cert"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// ServeZone answers DNS queries from rrs on 127.0.0.1 (UDP) until the test
// ends, and returns its address. A question gets the records of its name
// and type; with extras, a PTR question also gets the records of the names
// it points to in the additional section (RFC 6763 section 12.1). A name
// without records is NXDOMAIN.
func ServeZone(tb testing.TB, rrs []dns.RR, extras bool) string {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("DNS server: %v", err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		resp := new(dns.Msg)
		resp.SetReply(q)
		resp.Authoritative = true
		known := false
		for _, question := range q.Question {
			for _, rr := range rrs {
				h := rr.Header()
				if !strings.EqualFold(h.Name, question.Name) {
					continue
				}
				known = true
				if h.Rrtype != question.Qtype {
					continue
				}
				resp.Answer = append(resp.Answer, rr)
				if ptr, ok := rr.(*dns.PTR); ok && extras {
					for _, x := range rrs {
						if strings.EqualFold(x.Header().Name, ptr.Ptr) {
							resp.Extra = append(resp.Extra, x)
						}
					}
				}
			}
		}
		if !known {
			resp.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(resp)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// Link is a veth pair between the test's network namespace and a new one,
// Remote, for a multicast DNS responder: 192.0.2.1/24 on Local's side,
// 192.0.2.2/24 on Remote's, IPv6 off on both (so that a tentative address
// does not fail a query), multicast routed through the link on the local
// side. Everything is deleted when the test ends. It skips unless the test
// runs in a network namespace of its own (netlab.Main, as root).
type Link struct {
	Local, Remote *net.Interface
	RemoteNS      *netns.Namespace
	LocalAddr     netip.Addr
	RemoteAddr    netip.Addr
}

// NewLink makes a Link whose link names start with a per-run prefix.
func NewLink(tb testing.TB) *Link {
	tb.Helper()
	netlab.Require(tb)
	prefix := netlab.Prefix() + "sd"
	remote := netlab.Namespace(tb, prefix+"r")
	l := &Link{RemoteNS: remote, LocalAddr: netip.MustParseAddr("192.0.2.1"), RemoteAddr: netip.MustParseAddr("192.0.2.2")}
	local, err := netns.Open("")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = local.Close() })
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "l"}, PeerName: prefix + "r", PeerNamespace: netlink.NsFd(remote.Fd())}
	if err := netlink.LinkAdd(veth); err != nil {
		tb.Fatalf("add veth %s: %v", veth.Name, err)
	}
	tb.Cleanup(func() {
		// Deleting one end deletes the pair.
		if link, err := netlink.LinkByName(veth.Name); err == nil {
			_ = netlink.LinkDel(link)
		}
	})
	for _, end := range []struct {
		ns    *netns.Namespace
		name  string
		addr  netip.Addr
		iface **net.Interface
	}{{local, veth.Name, l.LocalAddr, &l.Local}, {remote, veth.PeerName, l.RemoteAddr, &l.Remote}} {
		err := inNS(end.ns, func() error {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+end.name+"/disable_ipv6", []byte("1"), 0); err != nil {
				return err
			}
			link, err := netlink.LinkByName(end.name)
			if err != nil {
				return err
			}
			addr := &netlink.Addr{IPNet: &net.IPNet{IP: end.addr.AsSlice(), Mask: net.CIDRMask(24, 32)}}
			if err := netlink.AddrAdd(link, addr); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return err
			}
			*end.iface, err = net.InterfaceByName(end.name)
			return err
		})
		if err != nil {
			tb.Fatalf("configure %s in %s: %v", end.name, end.ns, err)
		}
	}
	for _, end := range []struct {
		ns   *netns.Namespace
		name string
	}{{local, veth.Name}, {remote, veth.PeerName}} {
		if err := netlab.WaitUp(end.ns, end.name); err != nil {
			tb.Fatal(err)
		}
	}
	// The mDNS library's browser joins the group on the interface the
	// routes pick.
	route := &netlink.Route{LinkIndex: l.Local.Index, Dst: &net.IPNet{IP: net.IPv4(224, 0, 0, 0), Mask: net.CIDRMask(4, 32)}}
	if err := netlink.RouteAdd(route); err != nil {
		tb.Fatalf("route multicast through %s: %v", l.Local.Name, err)
	}
	return l
}

// InRemote runs f in the remote namespace: sockets it opens stay there.
func (l *Link) InRemote(f func() error) error { return inNS(l.RemoteNS, f) }

// Serve runs serve in the remote namespace until the test ends, when its
// context is cancelled and it must return nil, and waits until its output
// says ready.
func (l *Link) Serve(tb testing.TB, ready string, serve func(ctx context.Context, out io.Writer) error) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- l.InRemote(func() error { return serve(ctx, out) }) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("in %s: %v", l.RemoteNS, err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), ready) {
		select {
		case err := <-done:
			done <- err
			tb.Fatalf("in %s: ended before saying %q: %v; output %q", l.RemoteNS, ready, err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("in %s: did not say %q within 10s; output %q", l.RemoteNS, ready, out.String())
		}
	}
}

// lockedBuffer is a bytes.Buffer for one writer and one reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ParseZone reads zone-file lines (as ferryctl advertise --domain prints
// them) into records.
func ParseZone(tb testing.TB, text string) []dns.RR {
	tb.Helper()
	var rrs []dns.RR
	zp := dns.NewZoneParser(strings.NewReader(text), "", "")
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		tb.Fatalf("zone %q: %v", text, err)
	}
	return rrs
}

// inNS runs f on a goroutine of its own inside ns, so that the caller's
// thread never changes namespace.
func inNS(ns *netns.Namespace, f func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- ns.Do(f) }()
	return <-errc
}

// CA is a self-signed CA certificate in PEM, as a kubeconfig's
// certificate-authority-data holds it.
func CA(tb testing.TB, name string) []byte {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: name}, key)
	if err != nil {
		tb.Fatalf("CA %s: %v", name, err)
	}
	data, err := certutil.EncodeCertificates(cert)
	if err != nil {
		tb.Fatalf("CA %s: %v", name, err)
	}
	return data
}
