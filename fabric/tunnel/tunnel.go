// Package tunnel is the gateway's WireGuard device: one link in a network
// namespace (usually not the gateway process's own), configured through
// wgctrl.
//
// The device is kernel WireGuard when the kernel has it, and otherwise
// wireguard-go on a TUN device. Either way the link, its UDP socket and
// every socket used to configure it live in the target namespace, whatever
// the namespace of the thread that happens to run the call: the gateway
// talks to the API server from its own namespace and carries the tunnel in
// another (a pod's). wireguard-go reopens its UDP socket from background
// goroutines (on a listen-port change, when the link comes up), so the
// userspace device's Bind enters the namespace on every Open.
package tunnel

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/fabric/netns"
)

// Overhead is what WireGuard adds to a packet at most: an outer IPv6 header
// (40 bytes), UDP (8), the data message header (16) and the authentication
// tag (16). A link MTU of the underlay's MTU minus Overhead never
// fragments; with an IPv4 underlay OverheadIPv4 is enough. (Padding to 16
// bytes stays within the link MTU, so it does not add to this.)
const (
	Overhead     = 80
	OverheadIPv4 = 60
)

// Kinds of device, as Kind reports them.
const (
	KindKernel    = "kernel"
	KindUserspace = "userspace"
)

// Options describe the device Open makes.
type Options struct {
	// Name is the link's name (at most 15 bytes; no '/', ':' or spaces).
	// A userspace device's UAPI socket is /var/run/wireguard/<Name>.sock,
	// where wgctrl looks for it, whichever the namespace: two live
	// userspace devices on a host (sharing /var/run) need different names.
	Name string
	// MTU is the link's MTU; required.
	MTU int
	// ForceUserspace uses wireguard-go even when the kernel has WireGuard.
	ForceUserspace bool
	// Logger receives the device's messages (wireguard-go's verbose ones
	// at V(1)). The zero Logger discards them.
	Logger logr.Logger
}

// Device is an open WireGuard device. Its methods are safe for concurrent
// use.
type Device struct {
	name string
	kind string
	ns   *netns.Namespace // our own reference to the target namespace
	nl   *netlink.Handle  // rtnetlink in ns
	log  logr.Logger

	mu     sync.Mutex // serializes wgctrl calls and Close
	wg     *wgctrl.Client
	closed bool
	errc   error // Close's result, returned again by later calls

	user *userspace // nil for a kernel device
}

// Open makes the WireGuard link opts.Name in ns, sets its MTU and brings
// it up: a kernel WireGuard link when the kernel has the module (or
// adopting one of that name that is already there, as after a restart),
// else wireguard-go on a TUN device. ns may be closed once Open returns: the
// device keeps its own reference until Close.
func Open(ns *netns.Namespace, opts Options) (*Device, error) {
	if ns == nil {
		return nil, errors.New("open WireGuard device: no network namespace")
	}
	if err := validName(opts.Name); err != nil {
		return nil, fmt.Errorf("open WireGuard device: %w", err)
	}
	if opts.MTU <= 0 {
		return nil, fmt.Errorf("open WireGuard device %s: MTU %d: must be positive", opts.Name, opts.MTU)
	}
	d, err := open(ns, opts)
	if err != nil {
		return nil, fmt.Errorf("open WireGuard device %s in network namespace %s: %w", opts.Name, ns, err)
	}
	return d, nil
}

func open(target *netns.Namespace, opts Options) (_ *Device, err error) {
	ns, err := ownNamespace(target)
	if err != nil {
		return nil, err
	}
	d := &Device{name: opts.Name, ns: ns, log: opts.Logger.WithValues("device", opts.Name)}
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	undo = append(undo, func() { _ = ns.Close() })

	d.nl, err = ns.NetlinkHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink: %w", err)
	}
	undo = append(undo, d.nl.Close)

	existing, err := d.nl.LinkByName(opts.Name)
	var notFound netlink.LinkNotFoundError
	switch {
	case errors.As(err, &notFound):
		existing = nil
	case err != nil:
		return nil, fmt.Errorf("look up link: %w", err)
	}

	kernel := false
	switch {
	case existing == nil:
	case existing.Type() == "wireguard" && !opts.ForceUserspace:
		d.log.Info("Adopting the existing kernel WireGuard link")
		kernel = true
	case existing.Type() == "wireguard":
		d.log.Info("Deleting the existing kernel WireGuard link: userspace is forced")
		if err := d.nl.LinkDel(existing); err != nil {
			return nil, fmt.Errorf("delete the existing kernel WireGuard link: %w", err)
		}
		existing = nil
	case existing.Type() == "tuntap":
		// Perhaps a persistent TUN device, which CreateTUN attaches to;
		// if another process holds it, CreateTUN says so (busy).
	default:
		return nil, fmt.Errorf("a link of that name exists and is a %s, not a WireGuard device", existing.Type())
	}

	if existing == nil && !opts.ForceUserspace {
		err := d.nl.LinkAdd(&netlink.Wireguard{LinkAttrs: netlink.LinkAttrs{Name: opts.Name, MTU: opts.MTU}})
		switch {
		case err == nil:
			kernel = true
			undo = append(undo, func() { d.deleteLink() })
		case errors.Is(err, unix.EOPNOTSUPP):
			d.log.V(1).Info("The kernel has no WireGuard; using wireguard-go")
		default:
			return nil, fmt.Errorf("create kernel WireGuard link: %w", err)
		}
	}

	if kernel {
		d.kind = KindKernel
		link, err := d.nl.LinkByName(opts.Name)
		if err != nil {
			return nil, fmt.Errorf("look up link: %w", err)
		}
		if link.Attrs().MTU != opts.MTU {
			if err := d.nl.LinkSetMTU(link, opts.MTU); err != nil {
				return nil, fmt.Errorf("set MTU %d: %w", opts.MTU, err)
			}
		}
		if err := d.nl.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("bring the link up: %w", err)
		}
	} else {
		d.kind = KindUserspace
		d.user, err = openUserspace(ns, d.nl, opts.Name, opts.MTU, d.log)
		if err != nil {
			return nil, err
		}
		undo = append(undo, func() { _ = d.closeUserspace() })
	}

	// wgctrl's generic netlink socket (kernel devices) must be made in ns;
	// userspace devices it reaches through their UAPI socket.
	err = ns.Do(func() error {
		var err error
		d.wg, err = wgctrl.New()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open wgctrl: %w", err)
	}
	d.log.V(1).Info("WireGuard device open", "kind", d.kind, "mtu", opts.MTU)
	return d, nil
}

// ownNamespace opens a second reference to the namespace, so that the
// device does not depend on the caller keeping theirs open.
func ownNamespace(ns *netns.Namespace) (*netns.Namespace, error) {
	h, err := vnetns.GetFromPath(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()))
	if err != nil {
		return nil, fmt.Errorf("reference the network namespace: %w", err)
	}
	return netns.FromHandle(h, ns.String()), nil
}

// validName applies the kernel's rules for link names (dev_valid_name).
func validName(name string) error {
	switch {
	case name == "":
		return errors.New("no link name")
	case len(name) >= unix.IFNAMSIZ:
		return fmt.Errorf("link name %q: longer than %d bytes", name, unix.IFNAMSIZ-1)
	case name == "." || name == "..":
		return fmt.Errorf("link name %q: not allowed", name)
	case strings.ContainsAny(name, "/: \t\n\r\v\f"):
		return fmt.Errorf("link name %q: contains '/', ':' or a space", name)
	}
	return nil
}

// Kind is "kernel" or "userspace".
func (d *Device) Kind() string { return d.kind }

// Name is the link's name.
func (d *Device) Name() string { return d.name }

// Configure applies cfg to the device (wgctrl's ConfigureDevice).
func (d *Device) Configure(cfg wgtypes.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("configure WireGuard device %s: closed", d.name)
	}
	if err := d.wg.ConfigureDevice(d.name, cfg); err != nil {
		return fmt.Errorf("configure WireGuard device %s (%s): %w", d.name, d.kind, err)
	}
	return nil
}

// Device reads the device's current state: its keys and listen port, and
// its peers with their endpoints, allowed IPs, last handshake and byte
// counters.
func (d *Device) Device() (*wgtypes.Device, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("read WireGuard device %s: closed", d.name)
	}
	dev, err := d.wg.Device(d.name)
	if err != nil {
		return nil, fmt.Errorf("read WireGuard device %s (%s): %w", d.name, d.kind, err)
	}
	// wgctrl falls back from one kind to the other: make sure this is ours,
	// not a same-named device of the other kind (in another namespace).
	want := wgtypes.Userspace
	if d.kind == KindKernel {
		want = wgtypes.LinuxKernel
	}
	if dev.Type != want {
		return nil, fmt.Errorf("read WireGuard device %s (%s): found a %s device of that name instead", d.name, d.kind, dev.Type)
	}
	return dev, nil
}

// Close removes the device: a userspace device stops (its TUN link goes
// away) and its UAPI socket is removed; a kernel link is deleted. Later
// calls return the first call's result.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errc
	}
	d.closed = true
	var errs []error
	if err := d.wg.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close wgctrl: %w", err))
	}
	if d.user != nil {
		if err := d.closeUserspace(); err != nil {
			errs = append(errs, err)
		}
	} else if err := d.deleteLink(); err != nil {
		errs = append(errs, err)
	}
	d.nl.Close()
	if err := d.ns.Close(); err != nil {
		errs = append(errs, fmt.Errorf("release the network namespace: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		d.errc = fmt.Errorf("close WireGuard device %s: %w", d.name, err)
	}
	return d.errc
}

// deleteLink deletes the link, if it is there.
func (d *Device) deleteLink() error {
	link, err := d.nl.LinkByName(d.name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err == nil {
		err = d.nl.LinkDel(link)
	}
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link: %w", err)
	}
	return nil
}

// closeUserspace stops wireguard-go, removes the UAPI socket and makes
// sure the link has gone.
func (d *Device) closeUserspace() error {
	return errors.Join(d.user.close(), d.removeTUNLink(time.Second))
}

// removeTUNLink makes sure the userspace device's link has gone. It goes
// when its TUN file is closed, unless it is persistent (made by someone
// else and taken over by Open): then, or if it lingers, delete it.
func (d *Device) removeTUNLink(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		link, err := d.nl.LinkByName(d.name)
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("look up link: %w", err)
		}
		tap, isTUN := link.(*netlink.Tuntap)
		if (isTUN && !tap.NonPersist) || time.Now().After(deadline) {
			d.log.Info("Deleting the link left by the userspace device", "type", link.Type())
			return d.deleteLink()
		}
		time.Sleep(10 * time.Millisecond)
	}
}
