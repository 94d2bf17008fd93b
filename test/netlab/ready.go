package netlab

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ferry-io/ferry/fabric/netns"
)

// readyTimeout bounds the wait for a new link to work.
const readyTimeout = 10 * time.Second

// A link set up does not carry packets at once: the kernel's linkwatch
// work turns on its queueing (and a bridge's, once the bridge has a port
// with carrier) and moves a bridge port to forwarding a moment later, and
// what is sent meanwhile is dropped. An ARP request dropped so is retried
// after a second, which a test sees as a connection that takes a second.
// So the lab waits for every link it brings up, bridges included, to be
// operationally up, then checks the path with a ping, before it hands the
// namespace over.

// WaitUp waits until the links called names in ns are operationally up,
// for tests that bring up links of their own.
func WaitUp(ns *netns.Namespace, names ...string) error { return waitUp(ns, names...) }

// waitUp waits until the links called names in ns are operationally up.
func waitUp(ns *netns.Namespace, names ...string) error {
	return inNS(ns, func() error {
		deadline := time.Now().Add(readyTimeout)
		for _, name := range names {
			for {
				link, err := netlink.LinkByName(name)
				if err != nil {
					return fmt.Errorf("find %s: %w", name, err)
				}
				if link.Attrs().OperState == netlink.OperUp {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("link %s is still %s after %v", name, link.Attrs().OperState, readyTimeout)
				}
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	})
}

// ping sends ICMP echo requests from ns to dst until one is answered.
func ping(ns *netns.Namespace, dst netip.Addr) error {
	var c net.PacketConn
	err := inNS(ns, func() error {
		var err error
		c, err = net.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	})
	if err != nil {
		return fmt.Errorf("ping %s: %w", dst, err)
	}
	defer c.Close()
	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return err
	}
	id := binary.BigEndian.Uint16(idb[:])
	to := &net.IPAddr{IP: dst.AsSlice()}
	deadline := time.Now().Add(readyTimeout)
	buf := make([]byte, 1500)
	var last error
	for seq := uint16(1); time.Now().Before(deadline); seq++ {
		if _, err := c.WriteTo(echoRequest(id, seq), to); err != nil {
			last = err
			time.Sleep(20 * time.Millisecond)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		for {
			n, _, err := c.ReadFrom(buf) // the IPv4 header stripped
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					last = err
				}
				break
			}
			if n >= 8 && buf[0] == 0 && binary.BigEndian.Uint16(buf[4:]) == id && binary.BigEndian.Uint16(buf[6:]) == seq {
				return nil
			}
		}
	}
	return fmt.Errorf("ping %s from %s: no answer in %v (%v)", dst, ns, readyTimeout, last)
}

// echoRequest builds an ICMP echo request.
func echoRequest(id, seq uint16) []byte {
	m := []byte{8, 0, 0, 0, 0, 0, 0, 0, 'n', 'e', 't', 'l', 'a', 'b'}
	binary.BigEndian.PutUint16(m[4:], id)
	binary.BigEndian.PutUint16(m[6:], seq)
	var sum uint32
	for i := 0; i+1 < len(m); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(m[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(m[2:], ^uint16(sum))
	return m
}
