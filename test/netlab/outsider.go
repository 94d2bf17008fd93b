package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Outsider is a host on a cluster's side of the WAN that is neither a
// gateway nor a peer: it stands for whatever else shares the network in
// front of the gateway's endpoint, for tests of what the gateway lets in.
type Outsider struct {
	Name string
	NS   *netns.Namespace
	// IP is the outsider's address on the WAN, 198.19.<cluster>.<254-k>/24
	// for the cluster's k-th outsider.
	IP      netip.Addr
	Cluster *Cluster
}

// String names the outsider for logs and errors: cluster/name (ip).
func (o *Outsider) String() string {
	return fmt.Sprintf("%s/%s (%s)", o.Cluster.Name, o.Name, o.IP)
}

// AddOutsider adds a host called name on the cluster's side of the WAN: a
// namespace whose interface wan is a veth to the cluster's WAN bridge
// (<prefix>c<cluster>o<k> there), with the address 198.19.<cluster>.<254-k>/24
// and a route to 198.19.0.0/16 via the WAN. It has no route to any pod:
// a test gives it one (RouteVia) to play a host that routes a pod range
// via a gateway. AddOutsider returns once the outsider reaches the WAN.
func (c *Cluster) AddOutsider(name string) (*Outsider, error) {
	l := c.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if name == "" || slices.ContainsFunc(c.Outsiders, func(o *Outsider) bool { return o.Name == name }) {
		return nil, fmt.Errorf("netlab: add outsider %q to %s: want a new, non-empty name", name, c.Name)
	}
	k := len(c.Outsiders)
	if c.gateways+k >= 253 {
		return nil, fmt.Errorf("netlab: add outsider %s/%s: no more WAN addresses", c.Name, name)
	}
	o := &Outsider{Name: name, IP: addr4(198, 19, c.Index, 254-k), Cluster: c}
	ns, err := l.newNamespace(c.Name+"/"+name, false)
	if ns != nil {
		o.NS = ns
		if err == nil {
			err = c.plugWAN(ns, fmt.Sprintf("%sc%do%d", l.Prefix, c.Index, k), o.IP)
		}
	}
	if err != nil {
		if ns != nil {
			if derr := discard(ns); derr != nil {
				err = errors.Join(err, derr)
			}
			l.forget(ns)
		}
		return nil, fmt.Errorf("netlab: add outsider %s/%s: %w", c.Name, name, err)
	}
	c.Outsiders = append(c.Outsiders, o)
	return o, nil
}

// RouteVia routes dst from the outsider via gw, an address on its side of
// the WAN (such as a gateway's WANIP).
func (o *Outsider) RouteVia(dst netip.Prefix, gw netip.Addr) error {
	err := inNS(o.NS, func() error {
		link, err := netlink.LinkByName("wan")
		if err != nil {
			return fmt.Errorf("find wan: %w", err)
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst), Gw: gw.AsSlice()})
	})
	if err != nil {
		return fmt.Errorf("netlab: route %s via %s in %s: %w", dst, gw, o, err)
	}
	return nil
}
