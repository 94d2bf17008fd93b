package tunnel

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/ferry-io/ferry/fabric/netns"
)

// uapiDir is where wireguard-go's ipc.UAPIOpen puts its sockets and where
// wgctrl looks for them.
const uapiDir = "/var/run/wireguard"

// userspace is a wireguard-go device and its UAPI listener.
type userspace struct {
	ns       *nsGate
	dev      *device.Device
	uapi     *net.UnixListener
	sockPath string
	served   sync.WaitGroup // the UAPI accept loop
	log      logr.Logger
}

// openUserspace starts wireguard-go on a new TUN device name in ns, serves
// its UAPI socket and brings the link up.
func openUserspace(ns *netns.Namespace, nl *netlink.Handle, name string, mtu int, log logr.Logger) (_ *userspace, err error) {
	gate := &nsGate{ns: ns}
	// The TUN device, and the rtnetlink socket tun watches it with, are
	// made in ns: the link is then ns's, and so are its events.
	var tdev tun.Device
	err = ns.Do(func() error {
		var err error
		tdev, err = tun.CreateTUN(name, mtu)
		return err
	})
	if err != nil {
		return nil, tunError(err)
	}
	tdev = &nsTUN{Device: tdev, ns: gate}

	// UAPIOpen replaces a socket left by a process that died without
	// removing it, and refuses one that a live device still serves.
	u := &userspace{ns: gate, sockPath: filepath.Join(uapiDir, name+".sock"), log: log}
	file, err := ipc.UAPIOpen(name)
	if err != nil {
		_ = tdev.Close()
		if c, derr := net.Dial("unix", u.sockPath); derr == nil {
			c.Close()
			return nil, fmt.Errorf("open UAPI socket %s: a live userspace WireGuard device of that name serves it "+
				"(in whichever network namespace: the socket's path is the same in all, so userspace devices need names unique to the host): %w", u.sockPath, err)
		}
		return nil, fmt.Errorf("open UAPI socket %s: %w", u.sockPath, err)
	}
	l, err := net.FileListener(file)
	_ = file.Close()
	if err != nil {
		_ = tdev.Close()
		_ = os.Remove(u.sockPath)
		return nil, fmt.Errorf("listen on UAPI socket %s: %w", u.sockPath, err)
	}
	u.uapi = l.(*net.UnixListener)
	u.uapi.SetUnlinkOnClose(true)

	u.dev = device.NewDevice(tdev, &nsBind{Bind: conn.NewDefaultBind(), ns: gate}, deviceLogger(log))
	u.served.Add(1)
	go u.serve()
	defer func() {
		if err != nil {
			_ = u.close()
		}
	}()

	link, err := nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("look up the TUN link: %w", err)
	}
	if err := nl.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bring the link up: %w", err)
	}
	// The link's going up brings the device up too, through an event, but
	// later: do it now.
	if err := u.dev.Up(); err != nil {
		return nil, fmt.Errorf("bring wireguard-go up: %w", err)
	}
	return u, nil
}

// tunError says what a container lacks when the TUN device cannot be made:
// opening /dev/net/tun is refused by the container's device cgroup unless
// its runtime allows c 10:200 (runc does by default, but for 1.2.0 to
// 1.2.3), and making a device needs NET_ADMIN.
func tunError(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("create TUN device: %w (in a container: /dev/net/tun, c 10:200, must be allowed by its device cgroup, "+
			"which runc's defaults do but for runc 1.2.0-1.2.3, and the process needs NET_ADMIN; "+
			"or load the kernel's wireguard module on the node, which needs no TUN device)", err)
	}
	return fmt.Errorf("create TUN device: %w", err)
}

// serve answers UAPI requests (wgctrl's) until the listener is closed.
// (This rather than ipc.UAPIListen, whose two goroutines cannot both
// report an error after Close, so that one is left blocked for good; and
// whose watch for the socket's removal serves to stop the wireguard-go
// daemon, not a device within a gateway.)
func (u *userspace) serve() {
	defer u.served.Done()
	for {
		c, err := u.uapi.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Such as EMFILE: wait for it to pass.
			u.log.Error(err, "Accepting a connection on the UAPI socket")
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go u.dev.IpcHandle(c)
	}
}

// close stops the device (which closes the TUN device, and so removes its
// link) and removes the UAPI socket.
func (u *userspace) close() error {
	var errs []error
	if err := u.uapi.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		errs = append(errs, fmt.Errorf("close UAPI listener: %w", err))
	}
	u.served.Wait()
	u.dev.Close()
	// wireguard-go's TUN event reader may outlive Close by a moment.
	u.ns.close()
	// Closing unlinks the socket; should it not have, remove it.
	if err := os.Remove(u.sockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove UAPI socket: %w", err))
	}
	return errors.Join(errs...)
}

// nsBind is wireguard-go's default Bind (with its UDP GSO/GRO batching)
// opening its sockets in ns. wireguard-go calls Open from whichever
// goroutine changes the device's state: a UAPI handler on a listen-port
// change, its TUN event reader when the link comes up. Their threads are in
// the process's namespace, not the tunnel's. (The event reader brings the
// device up as soon as the TUN device exists, on recent kernels at least:
// tun's up-probe, a zero-length write, fails with EINVAL whether the link
// is up or not.)
//
// (Being a wrapper rather than a *conn.StdNetBind, it turns off
// wireguard-go's route listener, which would be listening in the wrong
// namespace anyway: after a route change a peer's cached source address
// is cleared only once a handshake is retried, not at once.)
type nsBind struct {
	conn.Bind
	ns *nsGate
}

func (b *nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	err = b.ns.Do(func() error {
		var err error
		fns, actual, err = b.Bind.Open(port)
		return err
	})
	return fns, actual, err
}

// nsTUN is a TUN device whose MTU is read in ns: tun reads it by the link's
// name through a socket it makes on the calling thread, wireguard-go's TUN
// event reader, whose thread is in the process's namespace.
type nsTUN struct {
	tun.Device
	ns *nsGate
}

func (t *nsTUN) MTU() (mtu int, err error) {
	err = t.ns.Do(func() error {
		var err error
		mtu, err = t.Device.MTU()
		return err
	})
	return mtu, err
}

// nsGate runs functions in a namespace until it is closed, after which
// they fail: the device's namespace reference is closed with the device,
// and wireguard-go's TUN event reader is not waited for by its Close.
type nsGate struct {
	mu     sync.RWMutex
	ns     *netns.Namespace
	closed bool
}

var errDeviceClosed = errors.New("the WireGuard device is closed")

func (g *nsGate) Do(f func() error) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return errDeviceClosed
	}
	return g.ns.Do(f)
}

func (g *nsGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// deviceLogger passes wireguard-go's messages to log, the verbose ones at
// V(1).
func deviceLogger(log logr.Logger) *device.Logger {
	verbose := log.V(1)
	return &device.Logger{
		Verbosef: func(format string, args ...any) {
			if verbose.Enabled() {
				verbose.Info(fmt.Sprintf(format, args...))
			}
		},
		Errorf: func(format string, args ...any) {
			if log.Enabled() {
				log.Error(nil, fmt.Sprintf(format, args...))
			}
		},
	}
}
