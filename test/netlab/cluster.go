package netlab

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Cluster is a simulated cluster: a router namespace for its underlay, its
// nodes and its pods.
type Cluster struct {
	Name string
	// Index is the cluster's place in the lab: it picks the underlay
	// 198.18.<Index>.0/24 and the WAN subnet 198.19.<Index>.0/24.
	Index int
	// Router is the underlay: a bridge to every node (which the nodes
	// cross to reach each other's pod subnets), routing each node's pod
	// subnet to that node for anything else on the underlay.
	Router *netns.Namespace
	// RouterIP is the router's underlay address, the nodes' default
	// gateway: 198.18.<Index>.254.
	RouterIP netip.Addr
	Nodes    []*Node
	// Pods are the cluster's pods, gateways included, in the order added.
	Pods []*Pod

	// Outsiders are the hosts on the cluster's side of the WAN that are
	// no gateway, in the order added.
	Outsiders []*Outsider

	lab      *Lab
	podSeq   int  // numbers the pods' links
	gateways int  // gateways added, numbers their WAN addresses
	wanUp    bool // the cluster's bridge in the WAN namespace exists
}

// Node is a node of a simulated cluster.
type Node struct {
	Name string // node-<k>
	NS   *netns.Namespace
	// IP is the node's underlay address, 198.18.<cluster>.<k+1>/24.
	IP        netip.Addr
	PodSubnet netip.Prefix
	Cluster   *Cluster
}

// Pod is a simulated pod.
type Pod struct {
	Name string
	NS   *netns.Namespace
	// IP is the pod's address, on eth0 as a /32.
	IP   netip.Addr
	Node *Node
	// WANIP is a gateway's address on the WAN, 198.19.<cluster>.<g+2>/24
	// for the cluster's g-th gateway; invalid for other pods.
	WANIP netip.Addr
}

// String names the pod for logs and errors: cluster/pod (ip).
func (p *Pod) String() string {
	return fmt.Sprintf("%s/%s (%s)", p.Node.Cluster.Name, p.Name, p.IP)
}

// String names the node for logs and errors: cluster/node.
func (n *Node) String() string { return n.Cluster.Name + "/" + n.Name }

// Gateways returns the cluster's gateway pods.
func (c *Cluster) Gateways() []*Pod {
	var gws []*Pod
	for _, p := range c.Pods {
		if p.WANIP.IsValid() {
			gws = append(gws, p)
		}
	}
	return gws
}

// Pod returns the cluster's pod called name, or nil.
func (c *Cluster) Pod(name string) *Pod {
	for _, p := range c.Pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func addr4(a, b, c, d int) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(a), byte(b), byte(c), byte(d)})
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func ipAddr(a netip.Addr, bits int) *netlink.Addr {
	return &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, bits))}
}

// localMAC returns a random locally administered unicast address: bridges
// get one so that their address does not change as ports come and go,
// which would leave stale entries in their neighbours' ARP caches.
func localMAC() net.HardwareAddr {
	mac := make(net.HardwareAddr, 6)
	if _, err := rand.Read(mac); err != nil {
		panic(err)
	}
	mac[0] = mac[0]&^1 | 2
	return mac
}

// addBridge creates an up bridge called name with address a/24 in the
// calling thread's namespace.
func addBridge(name string, a netip.Addr) error {
	if err := checkName(name); err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	attrs.HardwareAddr = localMAC()
	br := &netlink.Bridge{LinkAttrs: attrs}
	if err := netlink.LinkAdd(br); err != nil {
		return fmt.Errorf("add bridge %s: %w", name, err)
	}
	if err := netlink.AddrAdd(br, ipAddr(a, 24)); err != nil {
		return fmt.Errorf("address bridge %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return fmt.Errorf("bring up bridge %s: %w", name, err)
	}
	return nil
}

// addVeth creates an up veth called name in the calling thread's namespace
// whose peer, peerName, is made directly in peer (and left down); master,
// if not empty, is the bridge name joins.
func addVeth(name, peerName string, peer *netns.Namespace, master string) (netlink.Link, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	veth := netlink.NewVeth(attrs)
	veth.PeerName = peerName
	veth.PeerNamespace = netlink.NsFd(peer.Fd())
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("add veth %s (peer %s in %s): %w", name, peerName, peer, err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find veth %s: %w", name, err)
	}
	if master != "" {
		br, err := netlink.LinkByName(master)
		if err == nil {
			err = netlink.LinkSetMaster(link, br)
		}
		if err != nil {
			return nil, fmt.Errorf("attach %s to %s: %w", name, master, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bring up %s: %w", name, err)
	}
	return link, nil
}

func checkName(name string) error {
	if len(name) >= unix.IFNAMSIZ {
		return fmt.Errorf("link name %s: longer than %d characters", name, unix.IFNAMSIZ-1)
	}
	return nil
}

// upWithAddr finds the link called name in the calling thread's namespace,
// gives it a/bits and brings it up.
func upWithAddr(name string, a netip.Addr, bits int) (netlink.Link, error) {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", name, err)
	}
	if err := netlink.AddrAdd(link, ipAddr(a, bits)); err != nil {
		return nil, fmt.Errorf("address %s with %s/%d: %w", name, a, bits, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bring up %s: %w", name, err)
	}
	return link, nil
}

// AddCluster adds a cluster called name with one node per entry of
// podSubnets (IPv4, such as the nodes' spec.podCIDRs): a router namespace
// with a bridge, 198.18.<i>.254/24, where i is the cluster's index, and
// routes to each node's pod subnet via the node; node namespaces, node k
// at 198.18.<i>.<k+1>/24 on a veth to the bridge, with a default route to
// the router, a route to every other node's pod subnet via that node (over
// the bridge, not through the router), forwarding on, and an unreachable
// route for their pod subnet (so that packets to pods that do not exist
// fail fast). Clusters may share pod subnets: each is a world of its own.
func (l *Lab) AddCluster(name string, podSubnets []netip.Prefix) (*Cluster, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if err := checkSubnets(podSubnets); err != nil {
		return nil, fmt.Errorf("netlab: add cluster %s: %w", name, err)
	}
	if name == "" || slices.ContainsFunc(l.Clusters, func(c *Cluster) bool { return c.Name == name }) {
		return nil, fmt.Errorf("netlab: add cluster %q: want a new, non-empty name", name)
	}
	i := len(l.Clusters)
	if i > 255 {
		return nil, fmt.Errorf("netlab: add cluster %s: no more than 256 clusters", name)
	}
	c := &Cluster{Name: name, Index: i, RouterIP: addr4(198, 18, i, 254), lab: l}
	if err := c.build(podSubnets); err != nil {
		var made []*netns.Namespace
		if c.Router != nil {
			made = append(made, c.Router)
		}
		for _, n := range c.Nodes {
			made = append(made, n.NS)
		}
		slices.Reverse(made)
		if derr := discard(made...); derr != nil {
			err = errors.Join(err, derr)
		}
		l.forget(made...)
		return nil, fmt.Errorf("netlab: add cluster %s: %w", name, err)
	}
	l.Clusters = append(l.Clusters, c)
	return c, nil
}

func checkSubnets(subnets []netip.Prefix) error {
	if len(subnets) == 0 || len(subnets) > 253 {
		return fmt.Errorf("want 1 to 253 pod subnets (one per node), got %d", len(subnets))
	}
	for k, p := range subnets {
		if !p.IsValid() || !p.Addr().Is4() || p.Masked() != p {
			return fmt.Errorf("pod subnet %s: want an IPv4 prefix with no host bits", p)
		}
		for _, q := range subnets[:k] {
			if p.Overlaps(q) {
				return fmt.Errorf("pod subnets %s and %s overlap", q, p)
			}
		}
	}
	return nil
}

// build makes the cluster's namespaces, recording each in c as soon as it
// exists (for the caller to discard should build fail).
func (c *Cluster) build(podSubnets []netip.Prefix) error {
	l, i := c.lab, c.Index
	router, err := l.newNamespace(c.Name+"/router", true)
	if err != nil {
		return err
	}
	c.Router = router
	bridge := fmt.Sprintf("%sc%d", l.Prefix, i)
	err = inNS(router, func() error {
		err := sysctls(
			"net/ipv4/conf/all/send_redirects", "0",
			"net/ipv4/conf/default/send_redirects", "0",
		)
		if err != nil {
			return err
		}
		return addBridge(bridge, c.RouterIP)
	})
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	for k, subnet := range podSubnets {
		node := &Node{Name: fmt.Sprintf("node-%d", k), IP: addr4(198, 18, i, k+1), PodSubnet: subnet, Cluster: c}
		node.NS, err = l.newNamespace(c.Name+"/"+node.Name, true)
		if err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, node)
		nodeEnd, routerEnd := fmt.Sprintf("%sc%dn%d", l.Prefix, i, k), fmt.Sprintf("%sc%dr%d", l.Prefix, i, k)
		err = inNS(router, func() error {
			_, err := addVeth(routerEnd, nodeEnd, node.NS, bridge)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", node.Name, err)
		}
		err = inNS(node.NS, func() error {
			link, err := upWithAddr(nodeEnd, node.IP, 24)
			if err != nil {
				return err
			}
			if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: c.RouterIP.AsSlice()}); err != nil {
				return fmt.Errorf("default route via %s: %w", c.RouterIP, err)
			}
			if err := netlink.RouteAdd(&netlink.Route{Dst: ipNet(subnet), Type: unix.RTN_UNREACHABLE}); err != nil {
				return fmt.Errorf("unreachable route %s: %w", subnet, err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", node.Name, err)
		}
		err = inNS(router, func() error {
			if err := netlink.RouteAdd(&netlink.Route{Dst: ipNet(subnet), Gw: node.IP.AsSlice()}); err != nil {
				return fmt.Errorf("route %s via %s: %w", subnet, node.IP, err)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("router: %w", err)
		}
		err = waitUp(router, routerEnd, bridge)
		if err == nil {
			err = waitUp(node.NS, nodeEnd)
		}
		if err == nil {
			err = ping(node.NS, c.RouterIP)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", node.Name, err)
		}
	}
	return c.routeNodeToNode()
}

// routeNodeToNode gives every node a route to every other node's pod
// subnet via that node's underlay address, as a host-gw CNI (flannel's
// host-gw, Calico without encapsulation) does on a shared L2 underlay: node
// to node traffic crosses the router's bridge switched, never routed. A
// router routing it would send it back out of the bridge device it came
// in on, and a bridge device segments UDP-tunnel GSO packets (VXLAN from a
// node to a gateway on another node) in software, which no real L2 underlay
// does with a NIC that keeps tx-udp_tnl-segmentation.
func (c *Cluster) routeNodeToNode() error {
	for _, n := range c.Nodes {
		err := inNS(n.NS, func() error {
			for _, m := range c.Nodes {
				if m == n {
					continue
				}
				if err := netlink.RouteAdd(&netlink.Route{Dst: ipNet(m.PodSubnet), Gw: m.IP.AsSlice()}); err != nil {
					return fmt.Errorf("route %s via %s: %w", m.PodSubnet, m.IP, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", n.Name, err)
		}
	}
	return nil
}

// AddPod adds a pod called name with address ip, in the pod subnet of node
// n (an index into Nodes): a namespace whose eth0, ip/32, is a veth to the
// node, with a default route via 169.254.1.1 onlink, Calico style. The pod
// has a permanent neighbour entry for 169.254.1.1 with the MAC address of
// the node's end, which answers ARP too (proxy_arp). The node routes ip/32
// to its end, called <prefix>c<cluster>p<pod number>. AddPod returns once
// the pod reaches its node.
func (c *Cluster) AddPod(n int, name string, ip netip.Addr) (*Pod, error) {
	return c.addPod(n, name, ip, false)
}

// AddGateway adds a pod like AddPod, with forwarding on and reverse path
// filtering off, and a second interface, wan, a veth to a bridge of the
// cluster in the WAN namespace (<prefix>w<cluster>, 198.19.<cluster>.1/24):
// it stands for the LoadBalancer or NodePort path to the gateway. wan has
// the address 198.19.<cluster>.<g+2>/24 (WANIP; .2 for the cluster's first
// gateway) and a route to 198.19.0.0/16 via the WAN, where the other
// clusters' gateways are. AddGateway returns once the gateway reaches its
// node and the WAN.
func (c *Cluster) AddGateway(n int, name string, ip netip.Addr) (*Pod, error) {
	return c.addPod(n, name, ip, true)
}

func (c *Cluster) addPod(n int, name string, ip netip.Addr, gateway bool) (*Pod, error) {
	l := c.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if n < 0 || n >= len(c.Nodes) {
		return nil, fmt.Errorf("netlab: add pod %s/%s: no node %d (the cluster has %d)", c.Name, name, n, len(c.Nodes))
	}
	node := c.Nodes[n]
	if !ip.Is4() || !node.PodSubnet.Contains(ip) {
		return nil, fmt.Errorf("netlab: add pod %s/%s: address %s is not in %s's pod subnet %s", c.Name, name, ip, node.Name, node.PodSubnet)
	}
	for _, p := range c.Pods {
		if p.Name == name || p.IP == ip {
			return nil, fmt.Errorf("netlab: add pod %s/%s (%s): pod %s exists", c.Name, name, ip, p)
		}
	}
	if name == "" {
		return nil, fmt.Errorf("netlab: add pod in %s: want a name", c.Name)
	}
	pod := &Pod{Name: name, IP: ip, Node: node}
	if gateway {
		if c.gateways+len(c.Outsiders) >= 253 {
			return nil, fmt.Errorf("netlab: add gateway %s/%s: no more WAN addresses", c.Name, name)
		}
		pod.WANIP = addr4(198, 19, c.Index, c.gateways+2)
	}
	ns, err := l.newNamespace(c.Name+"/"+name, gateway)
	if ns != nil {
		pod.NS = ns
		if err == nil {
			err = c.plug(pod)
		}
	}
	if err != nil {
		if ns != nil {
			if derr := discard(ns); derr != nil {
				err = errors.Join(err, derr)
			}
			l.forget(ns)
		}
		return nil, fmt.Errorf("netlab: add pod %s/%s: %w", c.Name, name, err)
	}
	if gateway {
		c.gateways++
	}
	c.Pods = append(c.Pods, pod)
	return pod, nil
}

// plug joins a new pod's namespace to its node and, for a gateway, to the
// WAN.
func (c *Cluster) plug(pod *Pod) error {
	l, node := c.lab, pod.Node
	hostEnd := fmt.Sprintf("%sc%dp%d", l.Prefix, c.Index, c.podSeq)
	c.podSeq++
	var hostMAC net.HardwareAddr
	err := inNS(node.NS, func() error {
		link, err := addVeth(hostEnd, "eth0", pod.NS, "")
		if err != nil {
			return err
		}
		hostMAC = link.Attrs().HardwareAddr
		err = sysctls(
			"net/ipv4/conf/"+hostEnd+"/proxy_arp", "1",
			"net/ipv4/neigh/"+hostEnd+"/proxy_delay", "0",
		)
		if err != nil {
			return err
		}
		dst := netip.PrefixFrom(pod.IP, 32)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(dst), Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route %s to %s: %w", dst, hostEnd, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", node.Name, err)
	}
	err = inNS(pod.NS, func() error {
		link, err := upWithAddr("eth0", pod.IP, 32)
		if err != nil {
			return err
		}
		err = netlink.NeighAdd(&netlink.Neigh{
			LinkIndex:    link.Attrs().Index,
			Family:       netlink.FAMILY_V4,
			State:        netlink.NUD_PERMANENT,
			IP:           PodNextHop.AsSlice(),
			HardwareAddr: hostMAC,
		})
		if err != nil {
			return fmt.Errorf("neighbour %s: %w", PodNextHop, err)
		}
		err = netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: PodNextHop.AsSlice(), Flags: int(netlink.FLAG_ONLINK)})
		if err != nil {
			return fmt.Errorf("default route via %s: %w", PodNextHop, err)
		}
		return nil
	})
	if err == nil {
		err = waitUp(node.NS, hostEnd)
	}
	if err == nil {
		err = waitUp(pod.NS, "eth0")
	}
	if err == nil {
		err = ping(pod.NS, node.IP)
	}
	if err != nil || !pod.WANIP.IsValid() {
		return err
	}

	wanEnd := fmt.Sprintf("%sc%dg%d", l.Prefix, c.Index, c.podSeq-1)
	return c.plugWAN(pod.NS, wanEnd, pod.WANIP, "net/ipv4/conf/eth0/rp_filter", "0", "net/ipv4/conf/wan/rp_filter", "0")
}

// plugWAN joins ns to the cluster's bridge in the WAN namespace (made
// with the first host on it, <prefix>w<cluster>, 198.19.<cluster>.1/24) by
// a veth whose WAN end is wanEnd and whose end in ns, wan, has the address
// a/24 and a route to 198.19.0.0/16 via the WAN; sysctls are set in ns
// after.
func (c *Cluster) plugWAN(ns *netns.Namespace, wanEnd string, a netip.Addr, sysctlKV ...string) error {
	l := c.lab
	bridge := fmt.Sprintf("%sw%d", l.Prefix, c.Index)
	wanGW := addr4(198, 19, c.Index, 1)
	err := inNS(l.WAN, func() error {
		if !c.wanUp {
			if err := addBridge(bridge, wanGW); err != nil {
				return err
			}
			c.wanUp = true
		}
		_, err := addVeth(wanEnd, "wan", ns, bridge)
		return err
	})
	if err != nil {
		return fmt.Errorf("WAN: %w", err)
	}
	err = inNS(ns, func() error {
		link, err := upWithAddr("wan", a, 24)
		if err != nil {
			return err
		}
		err = netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: ipNet(WANRange), Gw: wanGW.AsSlice()})
		if err != nil {
			return fmt.Errorf("route %s via %s: %w", WANRange, wanGW, err)
		}
		return sysctls(sysctlKV...)
	})
	if err == nil {
		err = waitUp(l.WAN, wanEnd, bridge)
	}
	if err == nil {
		err = waitUp(ns, "wan")
	}
	if err == nil {
		err = ping(ns, wanGW)
	}
	return err
}
