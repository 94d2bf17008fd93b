// Package netlab simulates the pod networks of Kubernetes clusters with
// network namespaces, for ferry's tests and its demo.
//
// A Lab has one "internet" namespace (WAN) and any number of clusters. A
// cluster is a router namespace, which stands for the nodes' underlay (an
// L2 segment, its bridge, and a router on it that routes each node's pod
// subnet to that node), node namespaces joined to it by veths, which route
// each other's pod subnets directly over that segment (like a host-gw
// CNI), and pod namespaces joined to their node by a veth (eth0, a /32 and
// a link-local next hop, Calico style). A gateway pod has a second
// interface, "wan", to the WAN namespace: it stands for the LoadBalancer or
// NodePort path to the gateway's endpoint. An outsider (AddOutsider) is a
// host on that side of the WAN that is neither a gateway nor a peer.
//
// Address plan (IPv4 only; cluster index i = 0, 1, ... in AddCluster order):
//
//	198.18.i.0/24     cluster i's underlay: router 198.18.i.254, node k 198.18.i.(k+1)
//	pod subnets       as given to AddCluster; clusters may share them
//	169.254.1.1       every pod's default next hop (proxied by its node)
//	198.19.i.0/24     cluster i's side of the WAN: WAN 198.19.i.1, gateway g 198.19.i.(g+2),
//	                  outsider k 198.19.i.(254-k)
//
// Links (P is the lab's prefix, i the cluster's index, k a node's or an
// outsider's, j a pod's number in its cluster, in the order added):
//
//	router  Pc<i> (bridge), Pc<i>r<k> (port to node k)
//	node k  Pc<i>n<k> (to the router), Pc<i>p<j> (to pod j)
//	pod     eth0 (to its node), wan (a gateway's, to the WAN)
//	WAN     Pw<i> (bridge of cluster i's gateways and outsiders), Pc<i>g<j> (port to
//	        gateway pod j), Pc<i>o<k> (port to outsider k)
//	outsider wan (to the WAN)
//
// AddCluster, AddPod and AddGateway return once the new links carry
// packets (see ready.go), so that a test's first connection does not wait
// for an ARP retry.
//
// Safety: the lab never changes the network namespace it is created from.
// Every namespace it makes is new and unnamed (no bind mount), held by file
// descriptors only, so it vanishes with the process at the latest; every
// link it creates outside pods carries the lab's prefix (pods' interfaces are
// eth0 and wan, inside the pods' own namespaces); Close deletes them all.
// No route leads out of the lab's namespaces.
package netlab

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
)

// MaxPrefix is the longest prefix New accepts: link names are the prefix
// and up to 9 more characters, and Linux allows 15.
const MaxPrefix = 6

var (
	// UnderlayRange holds the clusters' underlays, 198.18.<cluster>.0/24.
	UnderlayRange = netip.MustParsePrefix("198.18.0.0/16")
	// WANRange holds the WAN addresses, 198.19.<cluster>.0/24.
	WANRange = netip.MustParsePrefix("198.19.0.0/16")
	// PodNextHop is the link-local next hop of every pod's default route.
	PodNextHop = netip.MustParseAddr("169.254.1.1")
)

// ErrClosed is returned by a Lab, and operations on its namespaces, after
// Close.
var ErrClosed = errors.New("netlab: lab closed")

// Lab is a set of simulated clusters joined by a simulated internet.
type Lab struct {
	// Prefix starts the name of every link the lab creates.
	Prefix string
	// WAN is the lab's "internet": a router between the gateways.
	WAN *netns.Namespace
	// Clusters are the clusters, in AddCluster order (Index).
	Clusters []*Cluster

	mu         sync.Mutex // guards the topology and closed
	closed     bool
	namespaces []*netns.Namespace // every namespace made, in order

	smu     sync.Mutex // guards servers
	servers map[*server]struct{}
}

// Prefix returns a random prefix for a lab: "f" and three hex digits.
func Prefix() string {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return fmt.Sprintf("f%03x", binary.BigEndian.Uint16(b[:])&0xfff)
}

// New makes a lab whose link names start with prefix (1 to MaxPrefix
// lowercase letters and digits, starting with a letter): so far only the
// WAN namespace, a router.
func New(prefix string) (*Lab, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	l := &Lab{Prefix: prefix, servers: map[*server]struct{}{}}
	wan, err := l.newNamespace("wan", true)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	l.WAN = wan
	return l, nil
}

func checkPrefix(p string) error {
	if p == "" || len(p) > MaxPrefix {
		return fmt.Errorf("netlab: prefix %q: want 1 to %d characters", p, MaxPrefix)
	}
	for i, r := range p {
		letter := r >= 'a' && r <= 'z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return fmt.Errorf("netlab: prefix %q: want lowercase letters and digits, starting with a letter", p)
		}
	}
	return nil
}

// Path returns a path another process can open to join ns (a namespace of
// the lab), valid while the lab is open.
func (l *Lab) Path(ns *netns.Namespace) string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd())
}

// Close stops the lab's servers, deletes every link in the lab's namespaces
// and closes them, so that the kernel ends them (unless something else,
// such as a socket still open in one, holds them: their links are gone
// anyway). Calling it again does nothing.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true

	l.smu.Lock()
	servers := make([]*server, 0, len(l.servers))
	for s := range l.servers {
		servers = append(servers, s)
	}
	l.servers = nil // no more
	l.smu.Unlock()
	for _, s := range servers {
		s.stop()
	}

	nss := l.namespaces
	l.namespaces = nil
	slices.Reverse(nss)
	return discard(nss...)
}

// discard deletes the links of namespaces (but loopback) and closes them.
func discard(nss ...*netns.Namespace) error {
	var errs []error
	for _, ns := range nss {
		if err := deleteLinks(ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range nss {
		if ns.Fd() < 0 {
			continue
		}
		if err := ns.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

func deleteLinks(ns *netns.Namespace) error {
	if ns.Fd() < 0 {
		return nil
	}
	return inNS(ns, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("list links in %s: %w", ns, err)
		}
		var errs []error
		for _, link := range links {
			if link.Attrs().Flags&net.FlagLoopback != 0 {
				continue
			}
			// Deleting a veth deletes its peer: a link listed may be gone.
			err := netlink.LinkDel(link)
			if err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("delete link %s in %s: %w", link.Attrs().Name, ns, err))
			}
		}
		return errors.Join(errs...)
	})
}

// Links returns the sorted names of the links in ns, or in the calling
// goroutine's namespace if ns is nil: for tests that compare before and
// after.
func Links(ns *netns.Namespace) ([]string, error) {
	var names []string
	list := func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		for _, link := range links {
			names = append(names, link.Attrs().Name)
		}
		slices.Sort(names)
		return nil
	}
	if ns == nil {
		return names, list()
	}
	return names, inNS(ns, list)
}

// newNamespace makes a new, unnamed network namespace, brings up its
// loopback, turns off reverse path filtering (so that it does not depend
// on the host's defaults) and, for a router, turns on forwarding. The lab
// holds it until Close. Callers hold l.mu or own l exclusively.
func (l *Lab) newNamespace(label string, router bool) (*netns.Namespace, error) {
	if l.closed {
		return nil, ErrClosed
	}
	ns, err := netns.New(l.Prefix + ":" + label)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	l.namespaces = append(l.namespaces, ns)
	err = inNS(ns, func() error {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			return fmt.Errorf("bring up loopback: %w", err)
		}
		settings := []string{
			"net/ipv4/conf/all/rp_filter", "0",
			"net/ipv4/conf/default/rp_filter", "0",
		}
		if router {
			settings = append(settings, "net/ipv4/ip_forward", "1")
		}
		return sysctls(settings...)
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: set up namespace %s: %w", ns, err)
	}
	return ns, nil
}

// forget drops namespaces from the lab's list (after discard).
func (l *Lab) forget(nss ...*netns.Namespace) {
	l.namespaces = slices.DeleteFunc(l.namespaces, func(ns *netns.Namespace) bool {
		return slices.Contains(nss, ns)
	})
}

// inNS runs f in ns (Namespace.Do) on a goroutine of its own, so that a
// failure to switch back ends that goroutine's thread, never the caller's.
func inNS(ns *netns.Namespace, f func() error) error {
	if ns == nil || ns.Fd() < 0 {
		return fmt.Errorf("namespace %v: %w", ns, ErrClosed)
	}
	errc := make(chan error, 1)
	go func() { errc <- ns.Do(f) }()
	return <-errc
}

// sysctls writes pairs of /proc/sys/ paths and values, in the calling
// thread's network namespace (net/ sysctls follow the writer's).
func sysctls(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := os.WriteFile("/proc/sys/"+kv[i], []byte(kv[i+1]), 0); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", kv[i], kv[i+1], err)
		}
	}
	return nil
}
