package overlay

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

// TestMain runs the tests as root in a network namespace of their own;
// every test then makes further, unnamed namespaces inside it.
func TestMain(m *testing.M) { netlab.Main(m) }

// names gives a test's links short names unique to the run: ferry's own
// links start with Ferry ("fy" and four random hex digits), the test bed's
// with "t" and the same digits, so that List(ns, n.Ferry) sees ferry's only.
type names struct{ Ferry, bed string }

func newNames() names {
	r := fmt.Sprintf("%04x", mrand.N(0x10000))
	return names{Ferry: "fy" + r, bed: "t" + r}
}

// Link is the name of one of ferry's links, Bed one of the test bed's.
func (n names) Link(role string) string { return n.Ferry + role }
func (n names) Bed(role string) string  { return n.bed + role }

// handle is a netlink handle in ns for the test bed's own configuration.
func handle(t *testing.T, ns *netns.Namespace) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle())
	if err != nil {
		t.Fatalf("netlink in %s: %v", ns, err)
	}
	t.Cleanup(h.Close)
	return h
}

// veth joins a (link nameA) and b (link nameB) with a veth pair, both ends
// up; a and b may be the same namespace.
func veth(t *testing.T, a *netns.Namespace, nameA string, b *netns.Namespace, nameB string) {
	t.Helper()
	ha := handle(t, a)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = nameA
	v := &netlink.Veth{LinkAttrs: attrs, PeerName: nameB, PeerNamespace: netlink.NsFd(b.Fd())}
	if err := ha.LinkAdd(v); err != nil {
		t.Fatalf("veth %s (%s) – %s (%s): %v", nameA, a, nameB, b, err)
	}
	t.Cleanup(func() {
		if l, err := ha.LinkByName(nameA); err == nil {
			_ = ha.LinkDel(l)
		}
	})
	up(t, a, nameA)
	up(t, b, nameB)
}

// stub gives ns a link of its own to hang routes on (the kernel here has
// no dummy driver: one end of a veth pair whose other end stays down).
func stub(t *testing.T, ns *netns.Namespace, name string) {
	t.Helper()
	h := handle(t, ns)
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: name + "p"}); err != nil {
		t.Fatalf("stub link %s in %s: %v", name, ns, err)
	}
	t.Cleanup(func() {
		if l, err := h.LinkByName(name); err == nil {
			_ = h.LinkDel(l)
		}
	})
	up(t, ns, name)
}

func link(t *testing.T, ns *netns.Namespace, name string) netlink.Link {
	t.Helper()
	l, err := handle(t, ns).LinkByName(name)
	if err != nil {
		t.Fatalf("link %s in %s: %v", name, ns, err)
	}
	return l
}

func up(t *testing.T, ns *netns.Namespace, name string) {
	t.Helper()
	if err := handle(t, ns).LinkSetUp(link(t, ns, name)); err != nil {
		t.Fatalf("bring up %s in %s: %v", name, ns, err)
	}
}

func addAddr(t *testing.T, ns *netns.Namespace, name, prefix string) {
	t.Helper()
	p := netip.MustParsePrefix(prefix)
	if err := handle(t, ns).AddrAdd(link(t, ns, name), &netlink.Addr{IPNet: prefixIPNet(p)}); err != nil {
		t.Fatalf("address %s on %s in %s: %v", prefix, name, ns, err)
	}
}

// addRoute installs a route the way another owner would (protocol proto,
// "boot" for the test bed): via may be empty for a direct route.
func addRoute(t *testing.T, ns *netns.Namespace, dst, name, via string, proto netlink.RouteProtocol) {
	t.Helper()
	r := &netlink.Route{
		Dst:       prefixIPNet(netip.MustParsePrefix(dst)),
		LinkIndex: link(t, ns, name).Attrs().Index,
		Protocol:  proto,
		Scope:     netlink.SCOPE_LINK,
	}
	if via != "" {
		r.Gw = net.ParseIP(via)
		r.Scope = netlink.SCOPE_UNIVERSE
	}
	if err := handle(t, ns).RouteAdd(r); err != nil {
		t.Fatalf("route %s via %q dev %s in %s: %v", dst, via, name, ns, err)
	}
}

// routeLines lists the routes of ns's main table to dst, rendered.
func routeLines(t *testing.T, ns *netns.Namespace) []string {
	t.Helper()
	h := handle(t, ns)
	rs, err := listRoutes(h, unix.RT_TABLE_MAIN)
	if err != nil {
		t.Fatalf("routes in %s: %v", ns, err)
	}
	var lines []string
	for _, r := range rs {
		lines = append(lines, describeRoute(h, r))
	}
	return lines
}

func do(t *testing.T, ns *netns.Namespace, f func() error) {
	t.Helper()
	if err := ns.Do(f); err != nil {
		t.Fatal(err)
	}
}

// readSysctl reads /proc/sys/<path> on a thread in ns; a nil ns is the
// test's own namespace.
func readSysctl(t *testing.T, ns *netns.Namespace, path string) string {
	t.Helper()
	var v []byte
	read := func() (err error) {
		v, err = os.ReadFile(filepath.Join("/proc/sys", path))
		return err
	}
	var err error
	if ns == nil {
		runtime.LockOSThread()
		err = read()
		runtime.UnlockOSThread()
	} else {
		err = ns.Do(read)
	}
	if err != nil {
		t.Fatalf("read %s in %v: %v", path, ns, err)
	}
	return strings.TrimSpace(string(v))
}

func writeSysctlIn(t *testing.T, ns *netns.Namespace, path, value string) {
	t.Helper()
	write := func() error { return os.WriteFile(filepath.Join("/proc/sys", path), []byte(value), 0) }
	var err error
	if ns == nil {
		runtime.LockOSThread()
		err = write()
		runtime.UnlockOSThread()
	} else {
		err = ns.Do(write)
	}
	if err != nil {
		t.Fatalf("write %s=%s in %v: %v", path, value, ns, err)
	}
}

// echoServer listens on addr in ns and echoes every connection back,
// reporting each peer's address on peers.
func echoServer(t *testing.T, ns *netns.Namespace, addr string) (peers <-chan netip.AddrPort) {
	t.Helper()
	var l net.Listener
	do(t, ns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	t.Cleanup(func() { l.Close() })
	ch := make(chan netip.AddrPort, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case ch <- c.RemoteAddr().(*net.TCPAddr).AddrPort():
			default:
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := io.Copy(c, c); err == nil {
					_ = c.(*net.TCPConn).CloseWrite()
				}
			}()
		}
	}()
	return ch
}

// dial connects to addr from a socket in ns.
func dial(ns *netns.Namespace, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// echo sends size random bytes from ns to the echo server at addr and
// checks that they come back unchanged.
func echo(ns *netns.Namespace, addr string, size int) error {
	c, err := dial(ns, addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial %s from %s: %w", addr, ns, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	payload := make([]byte, size)
	_, _ = rand.Read(payload)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got, rerr := io.ReadAll(c)
	if err := errors.Join(<-werr, rerr); err != nil {
		return fmt.Errorf("echo %d bytes with %s from %s: %w", size, addr, ns, err)
	}
	if !bytes.Equal(got, payload) {
		return fmt.Errorf("echo with %s from %s: sent %d bytes, got %d different ones back", addr, ns, size, len(got))
	}
	return nil
}

// reachable reports whether a TCP connection from ns to addr succeeds
// within a second.
func reachable(ns *netns.Namespace, addr string) bool {
	c, err := dial(ns, addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func contains(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}
