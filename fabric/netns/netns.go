// Package netns runs network operations inside a network namespace other
// than the calling thread's: the gateway and the route agent configure the
// namespace of a pod or a node while they talk to the API server from their
// own (in the test bed, the namespaces of simulated pods and nodes).
//
// Linux keeps the network namespace per thread, and Go moves goroutines
// between threads, so anything that creates a socket, a TUN device or a
// netlink handle for another namespace must run through Namespace.Do.
package netns

import (
	"fmt"
	"runtime"

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
// goroutine instead of reusing it in the wrong namespace.
func (n *Namespace) Do(f func() error) error {
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("read the thread's network namespace: %w", err)
	}
	defer orig.Close()
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
