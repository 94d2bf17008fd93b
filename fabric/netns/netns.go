// Package netns runs network operations inside a network namespace other
// than the calling thread's: the gateway and the route agent configure the
// namespace of a pod or a node while they talk to the API server from their
// own (in the test bed, the namespaces of simulated pods and nodes).
//
// Linux keeps the network namespace per thread, and Go moves goroutines
// between threads, so anything that creates a socket, a TUN device or a
// netlink handle for another namespace must run through Namespace.Do (or
// NetlinkHandle, or SocketFd for options that enter a namespace).
//
// Entering a namespace (setns) needs CAP_SYS_ADMIN, which a gateway or
// route agent in a container does not have (NET_ADMIN and NET_RAW only):
// when the target is the calling thread's own namespace (the same device
// and inode, whatever the path it was opened by), nothing is entered.
package netns

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Namespace is an open network namespace.
type Namespace struct {
	handle vnetns.NsHandle
	path   string
}

// Open opens the network namespace at path (such as /proc/<pid>/ns/net,
// /run/netns/<name> or /proc/self/fd/<n>); an empty path is the calling
// thread's own.
func Open(path string) (*Namespace, error) {
	if path == "" {
		h, err := vnetns.Get()
		if err != nil {
			return nil, fmt.Errorf("open the current network namespace: %w", err)
		}
		return &Namespace{handle: h, path: "current"}, nil
	}
	h, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	return &Namespace{handle: h, path: path}, nil
}

// FromHandle wraps an open namespace handle; Close closes it.
func FromHandle(h vnetns.NsHandle, name string) *Namespace {
	return &Namespace{handle: h, path: name}
}

// Handle is the namespace's file descriptor, for netlink.NewHandleAt and
// nftables.WithNetNSFd.
func (n *Namespace) Handle() vnetns.NsHandle { return n.handle }

// Fd is the namespace's file descriptor.
func (n *Namespace) Fd() int { return int(n.handle) }

// String names the namespace for logs and errors.
func (n *Namespace) String() string { return n.path }

// Close releases the namespace (it lives on while anything else holds it).
func (n *Namespace) Close() error { return n.handle.Close() }

// Do runs f on a thread switched into the namespace, and switches it back.
// Sockets, TUN devices and netlink sockets f creates stay in the namespace
// for their whole life, whichever thread uses them later. Should the
// switch back fail, the thread is left locked, and Go ends it with the
// goroutine instead of reusing it in the wrong namespace. When the
// namespace is the thread's own already, f runs on it as it is (on a
// locked thread all the same), without setns.
func (n *Namespace) Do(f func() error) error {
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("read the thread's network namespace: %w", err)
	}
	defer orig.Close()
	same, err := sameNamespace(orig, n.handle)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %s: %w", n.path, err)
	}
	if same {
		defer runtime.UnlockOSThread()
		return f()
	}
	if err := vnetns.Set(n.handle); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", n.path, err)
	}
	ferr := f()
	if err := vnetns.Set(orig); err != nil {
		return fmt.Errorf("leave network namespace %s: %w (after: %v)", n.path, err, ferr)
	}
	runtime.UnlockOSThread()
	return ferr
}

// IsCurrent reports whether the namespace is the calling thread's (the
// same device and inode). Unless the caller has locked its goroutine to
// its thread, the answer is the process's: Go runs unlocked goroutines only
// on threads in the namespace the process started in.
func (n *Namespace) IsCurrent() (bool, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := vnetns.Get()
	if err != nil {
		return false, fmt.Errorf("read the thread's network namespace: %w", err)
	}
	defer cur.Close()
	same, err := sameNamespace(cur, n.handle)
	if err != nil {
		return false, fmt.Errorf("network namespace %s: %w", n.path, err)
	}
	return same, nil
}

// sameNamespace compares two namespace handles by device and inode.
func sameNamespace(a, b vnetns.NsHandle) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Fstat(int(a), &sa); err != nil {
		return false, fmt.Errorf("stat namespace handle %d: %w", a, err)
	}
	if err := unix.Fstat(int(b), &sb); err != nil {
		return false, fmt.Errorf("stat namespace handle %d: %w", b, err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// NetlinkHandle opens a netlink handle (of the given protocols; all that
// netlink supports when none) whose sockets live in the namespace. In the
// calling thread's own namespace it opens them there, without setns.
func (n *Namespace) NetlinkHandle(families ...int) (*netlink.Handle, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := vnetns.Get()
	if err != nil {
		return nil, fmt.Errorf("read the thread's network namespace: %w", err)
	}
	defer cur.Close()
	same, err := sameNamespace(cur, n.handle)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", n.path, err)
	}
	target := n.handle
	if same {
		target = vnetns.None() // netlink then makes its sockets where it is
	}
	h, err := netlink.NewHandleAt(target, families...)
	if err != nil {
		return nil, fmt.Errorf("open netlink in network namespace %s: %w", n.path, err)
	}
	return h, nil
}

// SocketFd is the descriptor to give options that enter a namespace to
// make a socket there when given one that is not zero
// (nftables.WithNetNSFd, mdlayher/netlink's Config.NetNS): the namespace's,
// or zero when it is the process's own (see IsCurrent), whose sockets
// need no setns.
func (n *Namespace) SocketFd() (int, error) {
	same, err := n.IsCurrent()
	if err != nil {
		return 0, err
	}
	if same {
		return 0, nil
	}
	return n.Fd(), nil
}

// New makes a new, unnamed network namespace (nothing but a loopback,
// down) without changing the calling thread's: it unshares on a thread of
// its own and switches that thread back; should that fail, the thread
// stays locked and Go ends it with its goroutine. The namespace lives while
// the returned Namespace (or anything else) holds it.
func New(name string) (*Namespace, error) {
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{vnetns.None(), fmt.Errorf("read the thread's network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			c <- result{vnetns.None(), fmt.Errorf("unshare the network namespace: %w", err)}
			return
		}
		h, gerr := vnetns.Get()
		if err := vnetns.Set(orig); err != nil {
			if gerr == nil {
				_ = h.Close()
			}
			c <- result{vnetns.None(), fmt.Errorf("switch back to the original network namespace: %w", err)}
			return // locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		if gerr != nil {
			gerr = fmt.Errorf("open the new network namespace: %w", gerr)
		}
		c <- result{h, gerr}
	}()
	r := <-c
	if r.err != nil {
		return nil, fmt.Errorf("new network namespace %s: %w", name, r.err)
	}
	return &Namespace{handle: r.h, path: name}, nil
}
