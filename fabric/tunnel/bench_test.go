package tunnel

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ferry-io/ferry/test/netlab"
)

// BenchmarkThroughput streams TCP through the tunnel from one gateway
// namespace to the other, each end of the tunnel run by a process of its
// own: "ferry" by this package's userspace device, from a process in
// another namespace (as the gateway runs); "bare" by wireguard-go as its
// daemon runs, from a process wholly in the gateway's namespace.
// "inprocess" has both of this package's devices and the TCP ends in the
// test process.
func BenchmarkThroughput(b *testing.B) {
	netlab.Require(b)
	for _, mode := range []string{"ferry", "bare"} {
		b.Run(mode, func(b *testing.B) {
			ga, gb := linkedGateways(b, prefix+"b"+mode[:1])
			startGateway(b, mode, ga, gb)
			startGateway(b, mode, gb, ga)
			stream(b, ga, gb)
		})
	}
	b.Run("inprocess", func(b *testing.B) {
		ga, gb := pair(b, prefix+"bi")
		connect(b, ga, gb)
		stream(b, ga, gb)
	})
}

// startGateway runs a gateway for me in a process of its own (see
// TestHelperProcess), configured to reach other.
func startGateway(b *testing.B, mode string, me, other *gateway) {
	b.Helper()
	startHelper(b, mode, me.ns, me.name)
	wg, err := wgctrl.New()
	if err != nil {
		b.Fatal(err)
	}
	defer wg.Close()
	err = wg.ConfigureDevice(me.name, wgtypes.Config{
		PrivateKey: &me.key,
		ListenPort: &me.port,
		Peers:      []wgtypes.PeerConfig{other.peerConfig()},
	})
	if err != nil {
		b.Fatalf("configure %s: %v", me.name, err)
	}
	nl := nlHandle(b, me.ns)
	link, err := nl.LinkByName(me.name)
	if err == nil {
		err = nl.LinkSetUp(link)
	}
	if err == nil {
		addInner(b, me)
	}
	if err != nil {
		b.Fatal(err)
	}
}

// stream sends b.N chunks over TCP from a to b through the tunnel.
func stream(b *testing.B, ga, gb *gateway) {
	b.Helper()
	var ln net.Listener
	err := gb.ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(gb.inner.String(), "0"))
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		if err == nil {
			_, err = c.Write([]byte{1})
		}
		done <- err
	}()
	c := dial(b, ga, ln.Addr())
	chunk := make([]byte, 1<<17)
	// Warm up past the handshake.
	if _, err := c.Write(chunk); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(chunk)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N*len(chunk))*8/elapsed.Seconds()/1e9, "Gbit/s")
}
