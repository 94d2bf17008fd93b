package testbed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// UnderlaySubnet is the network real nodes share: the "machine network" of
// the test bed's clusters. It exists only inside the underlay's network
// namespace and the nodes' namespaces plugged into it; the host's network
// namespace never sees it, and nothing in it has a route anywhere else.
var UnderlaySubnet = netip.MustParsePrefix("172.31.250.0/24")

// underlayBridge is the bridge, inside the underlay namespace, every real
// node's eth0 is plugged into.
const underlayBridge = "br0"

// Underlay is the switch real nodes are plugged into: a network namespace
// holding a bridge. Clusters that must reach each other (a consumer and its
// providers: the virtual kubelet and the gateways dial the provider) share
// one Underlay; a cluster given none makes its own.
//
// The test bed's API servers listen on 127.0.0.1 of the host. Each cluster
// with real nodes gets an address on the underlay where a forwarder, in the
// underlay namespace, passes connections on to its API server: that is the
// address its nodes, its pods (the kubernetes Service's endpoint) and other
// clusters' pods reach it at. In the other direction (logs, exec,
// port-forward, webhooks behind Services), the API server goes through an
// HTTP CONNECT proxy on a unix socket (its egress selector), which dials
// from inside one of the cluster's nodes.
type Underlay struct {
	ns  *netns.Namespace
	mtu int // of the bridge and every node link; 0: the kernel's (1500)

	mu        sync.Mutex
	next      netip.Addr // next free address
	listeners []net.Listener
	closed    bool
	wg        sync.WaitGroup
}

// UnderlayOption changes how NewUnderlay makes the underlay.
type UnderlayOption func(*Underlay)

// WithMTU gives the underlay's bridge and every node's eth0 (and its veth
// peer on the bridge) that MTU, as a cloud network smaller than Ethernet's
// 1500 bytes does (1400, 1450, 1460 on several clouds). The real nodes'
// pods keep 1500 (ptp's default), more than the nodes' network carries,
// as with a CNI not set up for that network: what crosses nodes relies on
// the MTU of the nodes' routes and their ICMP "fragmentation needed".
func WithMTU(mtu int) UnderlayOption { return func(u *Underlay) { u.mtu = mtu } }

// NewUnderlay makes an underlay: a fresh network namespace with a bridge
// holding the subnet's first address. Close removes it.
func NewUnderlay(opts ...UnderlayOption) (*Underlay, error) {
	u := &Underlay{next: UnderlaySubnet.Addr().Next().Next()}
	for _, o := range opts {
		o(u)
	}
	if u.mtu != 0 && (u.mtu < 1280 || u.mtu > 9000) {
		return nil, fmt.Errorf("test bed underlay MTU %d outside 1280–9000", u.mtu)
	}
	ns, err := netns.New("test bed underlay")
	if err != nil {
		return nil, err
	}
	u.ns = ns
	if err := u.setUp(); err != nil {
		_ = ns.Close()
		return nil, fmt.Errorf("set up the test bed underlay: %w", err)
	}
	return u, nil
}

func (u *Underlay) setUp() error {
	h, err := netlink.NewHandleAt(u.ns.Handle())
	if err != nil {
		return fmt.Errorf("netlink in the underlay namespace: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("find lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: underlayBridge, MTU: u.mtu}}
	if err := h.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", underlayBridge, err)
	}
	first := UnderlaySubnet.Addr().Next()
	if err := h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: first.AsSlice(), Mask: net.CIDRMask(UnderlaySubnet.Bits(), 32)}}); err != nil {
		return fmt.Errorf("address bridge %s: %w", underlayBridge, err)
	}
	if err := h.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring bridge %s up: %w", underlayBridge, err)
	}
	// Nodes' default routes end here: forward nothing (a new namespace
	// starts so, unless the host's net.core.devconf_inherit_init_net
	// copies its own settings; say it anyway).
	return u.ns.Do(func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("0"), 0o644); err != nil {
			return fmt.Errorf("turn forwarding off in the underlay: %w", err)
		}
		return nil
	})
}

// allocate hands out the next free underlay address.
func (u *Underlay) allocate() (netip.Addr, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := u.next
	if !UnderlaySubnet.Contains(a) || a == netip.AddrFrom4([4]byte{172, 31, 250, 255}) {
		return netip.Addr{}, fmt.Errorf("test bed underlay %s is full", UnderlaySubnet)
	}
	u.next = a.Next()
	return a, nil
}

// bridge opens netlink in the underlay namespace and finds its bridge; the
// caller closes the handle.
func (u *Underlay) bridge() (*netlink.Handle, netlink.Link, error) {
	h, err := netlink.NewHandleAt(u.ns.Handle())
	if err != nil {
		return nil, nil, fmt.Errorf("netlink in the underlay namespace: %w", err)
	}
	br, err := h.LinkByName(underlayBridge)
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("find bridge %s: %w", underlayBridge, err)
	}
	return h, br, nil
}

// plug connects a node's network namespace to the bridge: a veth pair made
// from the underlay namespace, one end there on the bridge, the other
// created right in the node's namespace as eth0 with address a (clusters
// sharing an underlay plug their nodes concurrently: an eth0 made in the
// underlay namespace first, to be moved, collided with another's, "file
// exists"). The host's namespace never holds either end.
func (u *Underlay) plug(node *netns.Namespace, hostName string, a netip.Addr) error {
	h, br, err := u.bridge()
	if err != nil {
		return err
	}
	defer h.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: hostName, MasterIndex: br.Attrs().Index, MTU: u.mtu},
		PeerName:      "eth0",
		PeerMTU:       uint32(u.mtu),
		PeerNamespace: netlink.NsFd(node.Fd()),
	}
	if err := h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s with its peer eth0 in node %s: %w", hostName, hostName, err)
	}
	end, err := h.LinkByName(hostName)
	if err != nil {
		return fmt.Errorf("find veth %s: %w", hostName, err)
	}
	if err := h.LinkSetUp(end); err != nil {
		return fmt.Errorf("bring veth %s up: %w", hostName, err)
	}

	nh, err := netlink.NewHandleAt(node.Handle())
	if err != nil {
		return fmt.Errorf("netlink in node %s: %w", hostName, err)
	}
	defer nh.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := nh.LinkByName(name)
		if err != nil {
			return fmt.Errorf("node %s: find %s: %w", hostName, name, err)
		}
		if name == "eth0" {
			ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(UnderlaySubnet.Bits(), 32)}
			if err := nh.AddrAdd(l, &netlink.Addr{IPNet: ipn}); err != nil {
				return fmt.Errorf("node %s: address eth0: %w", hostName, err)
			}
		}
		if err := nh.LinkSetUp(l); err != nil {
			return fmt.Errorf("node %s: bring %s up: %w", hostName, name, err)
		}
	}
	// A default route, as every real node has: without one, the node's
	// own connections to Service IPs (host-network pods, such as ferry's
	// route agent, calling 10.96.0.1) fail with "network is unreachable"
	// before kube-proxy's rules could translate them. It points at the
	// bridge's address in the underlay namespace, which forwards nothing
	// (a new namespace has forwarding off) and has no route out.
	eth0, err := nh.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("node %s: find eth0: %w", hostName, err)
	}
	gw := UnderlaySubnet.Addr().Next()
	if err := nh.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("node %s: default route via %s: %w", hostName, gw, err)
	}
	return nil
}

// forward listens on a:port inside the underlay namespace and passes every
// connection on to 127.0.0.1:port of the host (an API server). The address
// is added to the bridge first.
func (u *Underlay) forward(a netip.Addr, port int) error {
	h, br, err := u.bridge()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
		return fmt.Errorf("add %s to the underlay bridge: %w", a, err)
	}
	var l net.Listener
	listenAt := netip.AddrPortFrom(a, uint16(port)).String()
	if err := u.ns.Do(func() (err error) {
		l, err = net.Listen("tcp", listenAt)
		return err
	}); err != nil {
		return fmt.Errorf("listen on %s in the underlay: %w", listenAt, err)
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		_ = l.Close()
		return errors.New("test bed underlay is closed")
	}
	u.listeners = append(u.listeners, l)
	u.mu.Unlock()
	target := fmt.Sprintf("127.0.0.1:%d", port)
	u.wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					_ = in.Close()
					return
				}
				pipe(in, out)
			}()
		}
	})
	return nil
}

// Close stops the forwarders and removes the underlay namespace (with the
// bridge and the node ends of the veths still in it).
func (u *Underlay) Close() error {
	u.mu.Lock()
	u.closed = true
	ls := u.listeners
	u.listeners = nil
	u.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
	u.wg.Wait()
	return u.ns.Close()
}

// pipe copies both ways until either side ends, then closes both.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Go(func() { cp(a, b) })
	wg.Go(func() { cp(b, a) })
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// egressProxy is the API server's way into the cluster's networks (its
// egress selector's "cluster" connection): an HTTP CONNECT proxy on a unix
// socket that dials the target from inside a node's network namespace, as
// an API server on a real node's host network would: node IPs (kubelet
// logs, exec, port-forward), Service IPs through kube-proxy (webhooks, the
// aggregation layer) and pod IPs all answer there.
type egressProxy struct {
	srv  *http.Server
	l    net.Listener
	dial func(ctx context.Context, addr string) (net.Conn, error)
	done chan struct{}
}

func startEgressProxy(socket string, dial func(ctx context.Context, addr string) (net.Conn, error)) (*egressProxy, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listen on egress proxy socket %s: %w", socket, err)
	}
	p := &egressProxy{l: l, dial: dial, done: make(chan struct{})}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.Serve(l)
	}()
	return p, nil
}

func (p *egressProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	out, err := p.dial(ctx, r.Host)
	cancel()
	if err != nil {
		http.Error(w, fmt.Sprintf("dial %s: %v", r.Host, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = out.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	in, buf, err := hj.Hijack()
	if err != nil {
		_ = out.Close()
		return
	}
	if _, err := in.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = in.Close()
		_ = out.Close()
		return
	}
	go pipe(&bufferedConn{Conn: in, r: buf.Reader}, out)
}

func (p *egressProxy) close() {
	_ = p.srv.Close()
	<-p.done
}

// bufferedConn reads first what the HTTP server had already buffered.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the underlying connection when it can.
func (c *bufferedConn) CloseWrite() error {
	if tc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return tc.CloseWrite()
	}
	return c.Conn.Close()
}

// dialIn dials addr from inside a network namespace: the socket is made on
// a thread switched into it and stays there.
func dialIn(ctx context.Context, ns *netns.Namespace, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}
