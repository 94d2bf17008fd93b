package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/go-logr/logr"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/fabric/nat"
	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/fabric/overlay"
	"github.com/ferry-io/ferry/fabric/tunnel"
)

// Defaults of the gateway's links.
const (
	// DefaultListenPort is the gateway's WireGuard UDP port.
	DefaultListenPort = 51820
	// DefaultVNI is the VXLAN network identifier of the node overlay.
	DefaultVNI = overlay.DefaultVNI
	// DefaultVXLANPort is the node overlay's UDP port, clear of the ports
	// CNIs use for their own VXLAN (4789, 8472).
	DefaultVXLANPort = overlay.DefaultPort
	// DefaultPrefix names the links (<prefix>-wg, <prefix>-vx) and the
	// nftables table (<prefix>) ferry makes.
	DefaultPrefix = "ferry"
)

// Links are the names of what a gateway or route agent makes.
type Links struct {
	// Prefix of every link name, and the nftables table's name.
	Prefix string
}

// Tunnel is the WireGuard device's name.
func (l Links) Tunnel() string { return l.Prefix + "-wg" }

// VXLAN is the overlay link's name.
func (l Links) VXLAN() string { return l.Prefix + "-vx" }

// Table is the nftables table's name.
func (l Links) Table() string { return l.Prefix }

// DataPlane installs a Plan in the gateway's network namespace. It makes
// nothing while there is no peer, and removes everything it made when the
// last peer goes (Apply with an empty plan) or on Teardown.
type DataPlane struct {
	// NS is the gateway pod's network namespace.
	NS *netns.Namespace
	Links
	// ListenPort is the WireGuard UDP port.
	ListenPort int
	// MTU of the tunnel; 0: the underlay's MTU less WireGuard's overhead.
	// Nodes give the routes to peers this MTU (at most their VXLAN link's),
	// so a pod's packet fits both encapsulations.
	MTU int
	// VXLANPort and VNI of the node overlay.
	VXLANPort, VNI int
	// ForceUserspace skips kernel WireGuard.
	ForceUserspace bool
	Log            logr.Logger

	mu         sync.Mutex
	closed     bool
	dev        *tunnel.Device
	mtu, vxMTU int
	// endpoints are the peers' endpoints as the plan last gave them.
	endpoints map[wgtypes.Key]string
}

// errClosed: the data plane was closed (the process is stopping).
var errClosed = errors.New("the data plane is closed")

// Applied is what Apply installed.
type Applied struct {
	// Rules is the number of nftables rules.
	Rules int
	// MTU of the tunnel (and of the routes nodes give peers' ranges).
	MTU int
	// Kind of the tunnel: kernel or userspace; empty when none.
	Kind string
	// EndpointErrors are peers whose endpoint did not resolve.
	EndpointErrors map[string]error
}

// Apply makes the namespace's tunnel, routes and NAT exactly the plan's.
func (d *DataPlane) Apply(plan Plan, key wgtypes.Key) (Applied, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Applied{}, errClosed
	}
	if len(plan.Peers) == 0 {
		return Applied{}, d.teardown()
	}
	if err := d.open(); err != nil {
		return Applied{}, err
	}
	if err := overlay.EnsureVXLAN(d.NS, overlay.VXLAN{Name: d.VXLAN(), VNI: d.VNI, Port: d.VXLANPort, MTU: d.vxMTU,
		MAC: overlay.GatewayMAC, Address: netip.PrefixFrom(overlay.GatewayOverlayIP, 32)}); err != nil {
		return Applied{}, err
	}
	// Packets from nodes arrive on the VXLAN link and their replies leave by
	// the pod's interface: no reverse-path filter on the gateway's links.
	if err := overlay.EnableForwarding(d.NS, d.Tunnel(), d.VXLAN()); err != nil {
		return Applied{}, err
	}
	// NAT and the forward filter first, then the tunnel's peers and the
	// routes into it: no packet is forwarded untranslated while a gateway
	// takes over (its rules match links by name, so they may precede
	// them). Teardown goes the other way: the tunnel, then the rules.
	rules, err := nat.Apply(d.NS, plan.NAT(d.Table(), d.Tunnel(), d.VXLAN()))
	if err != nil {
		return Applied{}, err
	}
	cfg, epErrs := plan.WireGuard(key, d.ListenPort, func(s string) (*net.UDPAddr, error) { return net.ResolveUDPAddr("udp", s) })
	cur, err := d.dev.Device()
	if err != nil {
		return Applied{}, err
	}
	if d.endpoints == nil {
		d.endpoints = map[wgtypes.Key]string{}
	}
	cfg = followEndpoints(cur, cfg, d.endpoints)
	if change, ok := delta(cur, cfg); ok {
		if err := d.dev.Configure(change); err != nil {
			clear(d.endpoints) // set every endpoint again next time
			return Applied{}, err
		}
	}
	if err := overlay.SyncRoutes(d.NS, plan.TunnelRoutes(d.Tunnel())); err != nil {
		return Applied{}, err
	}
	return Applied{Rules: rules, MTU: d.mtu, Kind: d.dev.Kind(), EndpointErrors: epErrs}, nil
}

func (d *DataPlane) open() error {
	if d.dev != nil {
		return nil
	}
	under, err := overlay.UnderlayMTU(d.NS)
	if err != nil {
		return err
	}
	mtu := d.MTU
	if mtu == 0 {
		mtu = under - overlay.WireGuardOverhead
	}
	dev, err := tunnel.Open(d.NS, tunnel.Options{Name: d.Tunnel(), MTU: mtu, ForceUserspace: d.ForceUserspace, Logger: d.Log})
	if err != nil {
		return err
	}
	d.dev, d.mtu, d.vxMTU = dev, mtu, under-overlay.VXLANOverhead
	d.Log.Info("Opened the tunnel", "link", d.Tunnel(), "kind", dev.Kind(), "mtu", mtu)
	return nil
}

// Device is the tunnel's state; nil while there is no tunnel.
func (d *DataPlane) Device() (*wgtypes.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dev == nil {
		return nil, nil
	}
	return d.dev.Device()
}

// Counters are the per-peer packet and byte counters of the NAT table.
func (d *DataPlane) Counters() (map[string]nat.Counters, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dev == nil {
		return nil, nil
	}
	return nat.ReadCounters(d.NS, d.Table())
}

// ForwardDropped is what the forward filter has dropped: zero while there
// is no tunnel.
func (d *DataPlane) ForwardDropped() (nat.Dropped, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dev == nil {
		return nat.Dropped{}, nil
	}
	return nat.ReadForwardDropped(d.NS, d.Table())
}

// Teardown removes everything the data plane made, including what a
// previous, killed gateway left in the namespace.
func (d *DataPlane) Teardown() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.teardown()
}

// Close tears down and refuses any later Apply.
func (d *DataPlane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return d.teardown()
}

func (d *DataPlane) teardown() error {
	var errs []error
	if d.dev != nil {
		errs = append(errs, d.dev.Close())
		d.dev = nil
	}
	clear(d.endpoints)
	errs = append(errs, nat.Remove(d.NS, d.Table()), overlay.Remove(d.NS, d.Tunnel(), d.VXLAN()))
	d.mtu, d.vxMTU = 0, 0
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove the gateway's links, routes and rules: %w", err)
	}
	return nil
}

// NodePlane is the node side of the overlay, run by the route agent in
// each node's network namespace: a VXLAN link to the gateway pod and a
// route for every peer range through it.
type NodePlane struct {
	// NS is the node's network namespace.
	NS *netns.Namespace
	Links
	// VXLANPort and VNI must be the gateway's (it publishes them).
	VXLANPort, VNI int

	mu     sync.Mutex
	closed bool
}

// Apply points the node's routes for ranges at the gateway at address gw;
// with no range, it removes everything instead.
func (n *NodePlane) Apply(gw netip.Addr, ranges []netip.Prefix, mtu int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errClosed
	}
	if len(ranges) == 0 || !gw.IsValid() {
		return n.teardown()
	}
	under, err := overlay.UnderlayMTU(n.NS)
	if err != nil {
		return err
	}
	vxMTU := under - overlay.VXLANOverhead
	// The gateway sizes its tunnel by its pod interface, which may be
	// larger than what the nodes' network carries (a CNI giving pods 1500
	// bytes on a 1400-byte cloud network): its WireGuard packets, a peer
	// route's packet and WireGuard's overhead, leave the gateway's node by
	// that network, so no peer route may be larger than the underlay less
	// that overhead (nodes of a cluster share one network), nor than the
	// VXLAN link. Pods learn it from this node's ICMP "fragmentation
	// needed"; an outer packet too large would be dropped past the node,
	// where nothing tells the pod.
	limit := min(vxMTU, under-overlay.WireGuardOverhead)
	if mtu == 0 || mtu > limit {
		mtu = limit
	}
	if err := overlay.EnsureVXLAN(n.NS, overlay.VXLAN{Name: n.VXLAN(), VNI: n.VNI, Port: n.VXLANPort, MTU: vxMTU, Remote: gw}); err != nil {
		return err
	}
	if err := overlay.SetNeighbor(n.NS, n.VXLAN(), overlay.GatewayOverlayIP, overlay.GatewayMAC); err != nil {
		return err
	}
	routes := make([]overlay.Route, 0, len(ranges))
	for _, r := range ranges {
		routes = append(routes, overlay.Route{Dst: r, Link: n.VXLAN(), Via: overlay.GatewayOverlayIP, MTU: mtu})
	}
	return overlay.SyncRoutes(n.NS, routes)
}

// Teardown removes the node's VXLAN link and every route of ferry's.
func (n *NodePlane) Teardown() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.teardown()
}

// Close tears down and refuses any later Apply.
func (n *NodePlane) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	return n.teardown()
}

func (n *NodePlane) teardown() error {
	if err := overlay.Remove(n.NS, n.VXLAN()); err != nil {
		return fmt.Errorf("remove the node's overlay: %w", err)
	}
	return nil
}
