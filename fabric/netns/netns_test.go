package netns_test

import (
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/test/netlab"
)

func TestMain(m *testing.M) { netlab.Main(m) }

// The process's namespace is recognised by device and inode whatever the
// path it was opened by; another is not; and each gets its own sockets.
func TestCurrentNamespaceIsRecognisedByIdentityNotPath(t *testing.T) {
	netlab.Require(t)
	other := netlab.Namespace(t, "other")
	for _, path := range []string{"", "/proc/self/ns/net", "/proc/thread-self/ns/net"} {
		ns, err := netns.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ns.Close() })
		cur, err := ns.IsCurrent()
		if err != nil || !cur {
			t.Errorf("Open(%q).IsCurrent() = %v, %v; want true", path, cur, err)
		}
		if fd, err := ns.SocketFd(); err != nil || fd != 0 {
			t.Errorf("Open(%q).SocketFd() = %d, %v; want 0 (no namespace to enter)", path, fd, err)
		}
	}
	if cur, err := other.IsCurrent(); err != nil || cur {
		t.Errorf("another namespace: IsCurrent() = %v, %v; want false", cur, err)
	}
	if fd, err := other.SocketFd(); err != nil || fd != other.Fd() {
		t.Errorf("another namespace: SocketFd() = %d, %v; want its fd %d", fd, err, other.Fd())
	}

	// A link made through each handle lands in that handle's namespace.
	own, err := netns.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	name := netlab.Prefix() + "n"
	for _, ns := range []*netns.Namespace{own, other} {
		h, err := ns.NetlinkHandle(unix.NETLINK_ROUTE)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		h.Close()
	}
	for _, ns := range []*netns.Namespace{own, other} {
		err := ns.Do(func() error {
			l, err := netlink.LinkByName(name)
			if err == nil {
				err = netlink.LinkDel(l)
			}
			return err
		})
		if err != nil {
			t.Errorf("%s: the link made through its handle: %v", ns, err)
		}
	}
}
