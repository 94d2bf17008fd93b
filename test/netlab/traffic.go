package netlab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// sinkMagic, as the first byte of a connection to ServeSink, asks for the
// sink: the server discards all that follows and, at end of stream,
// replies with the number of bytes it got (8 bytes, big endian). Any other
// first byte gets an echo.
const sinkMagic = 0xfe

// server is a TCP server in a pod's namespace.
type server struct {
	lab  *Lab
	ln   net.Listener
	wg   sync.WaitGroup
	once sync.Once

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// serve listens on 0.0.0.0:port in the pod's namespace and runs handle
// for every connection, which it closes when handle returns.
func (p *Pod) serve(port int, handle func(net.Conn)) (stop func(), err error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("netlab: serve in pod %s: bad port %d", p, port)
	}
	var ln net.Listener
	err = inNS(p.NS, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netlab: serve on port %d in pod %s: %w", port, p, err)
	}
	l := p.Node.Cluster.lab
	s := &server{lab: l, ln: ln, conns: map[net.Conn]struct{}{}}
	l.smu.Lock()
	if l.servers == nil { // the lab is closed
		l.smu.Unlock()
		_ = ln.Close()
		return nil, ErrClosed
	}
	l.servers[s] = struct{}{}
	l.smu.Unlock()

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				_ = c.Close()
				return
			}
			s.conns[c] = struct{}{}
			s.wg.Add(1)
			s.mu.Unlock()
			go func() {
				defer s.wg.Done()
				handle(c)
				_ = c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			}()
		}
	}()
	return s.stop, nil
}

// stop closes the listener and the open connections and waits for the
// handlers to return.
func (s *server) stop() {
	s.once.Do(func() {
		_ = s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.lab.smu.Lock()
		delete(s.lab.servers, s)
		s.lab.smu.Unlock()
	})
}

// ServeEcho serves TCP echo on 0.0.0.0:port in the pod: whatever a client
// sends comes back. stop ends the server and its connections; Close of the
// lab does too.
func (p *Pod) ServeEcho(port int) (stop func(), err error) {
	return p.serve(port, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// ServeSink serves Throughput on 0.0.0.0:port in the pod. It answers
// Latency and Echo too, as ServeEcho does, but for a payload whose first
// byte is 0xfe.
func (p *Pod) ServeSink(port int) (stop func(), err error) {
	return p.serve(port, func(c net.Conn) {
		var first [1]byte
		if _, err := io.ReadFull(c, first[:]); err != nil {
			return
		}
		if first[0] != sinkMagic {
			if _, err := c.Write(first[:]); err == nil {
				_, _ = io.Copy(c, c)
			}
			return
		}
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return
		}
		_, _ = c.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
	})
}

// ServeInfo serves on 0.0.0.0:port in the pod: it sends each client the
// address it sees the connection come from, as a line, and closes the
// connection; SeenAs is its client. It shows what NAT did to a source.
func (p *Pod) ServeInfo(port int) (stop func(), err error) {
	return p.serve(port, func(c net.Conn) { _, _ = fmt.Fprintf(c, "%s\n", c.RemoteAddr()) })
}

// SeenAs connects to a ServeInfo server at addr and returns the source
// address the server saw.
func (p *Pod) SeenAs(ctx context.Context, addr netip.AddrPort) (netip.AddrPort, error) {
	c, done, err := p.dialFor(ctx, addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer done()
	line, err := bufio.NewReader(io.LimitReader(c, 128)).ReadString('\n')
	if err != nil {
		return netip.AddrPort{}, p.failed(ctx, "read the reply of", addr, err)
	}
	seen, err := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("pod %s: the server at %s replied %q: %w", p, addr, line, err)
	}
	return netip.AddrPortFrom(seen.Addr().Unmap(), seen.Port()), nil
}

// Dial opens a TCP connection from the pod to addr; its socket lives in
// the pod's namespace whichever goroutine uses it.
func (p *Pod) Dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	network := "tcp4"
	if addr.Addr().Unmap().Is6() {
		network = "tcp6"
	}
	var c net.Conn
	err := inNS(p.NS, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s: dial %s: %w", p, addr, err)
	}
	return c, nil
}

// dialFor dials addr and ties the connection to ctx: its deadline becomes
// the connection's, and cancelling ctx interrupts blocked reads and writes.
// done releases the connection.
func (p *Pod) dialFor(ctx context.Context, addr netip.AddrPort) (c net.Conn, done func(), err error) {
	c, err = p.Dial(ctx, addr)
	if err != nil {
		return nil, nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	return c, func() { stop(); _ = c.Close() }, nil
}

// failed describes an error of a step with a connection to addr, with the
// context's error if that is why.
func (p *Pod) failed(ctx context.Context, step string, addr netip.AddrPort, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("pod %s: %s %s: %w (%w)", p, step, addr, err, cerr)
	}
	return fmt.Errorf("pod %s: %s %s: %w", p, step, addr, err)
}

// Echo connects from the pod to an echo server (ServeEcho, ServeSink) at
// addr, sends payload, reads it back and compares. Its error says which
// step failed: dial, send, read back, or compare.
func (p *Pod) Echo(ctx context.Context, addr netip.AddrPort, payload []byte) error {
	c, done, err := p.dialFor(ctx, addr)
	if err != nil {
		return err
	}
	defer done()
	sent := make(chan error, 1)
	go func() {
		_, err := c.Write(payload)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	got := make([]byte, len(payload))
	n, rerr := io.ReadFull(c, got)
	if rerr != nil {
		_ = c.Close() // unblock the writer
	}
	if err := <-sent; err != nil {
		return p.failed(ctx, fmt.Sprintf("send %d bytes to", len(payload)), addr, err)
	}
	if rerr != nil {
		return p.failed(ctx, fmt.Sprintf("read back (got %d of %d bytes) from", n, len(payload)), addr, rerr)
	}
	if !bytes.Equal(got, payload) {
		at := 0
		for at < len(got) && got[at] == payload[at] {
			at++
		}
		return fmt.Errorf("pod %s: echo from %s differs from what was sent at byte %d of %d", p, addr, at, len(payload))
	}
	return nil
}

// Throughput sends as fast as it can for d over one TCP connection from
// the pod to a ServeSink server at addr, and returns the bits per second
// the sink received (counted by the sink, over the time from the first
// byte sent to the sink's count received).
func (p *Pod) Throughput(ctx context.Context, addr netip.AddrPort, d time.Duration) (float64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("netlab: throughput for %v: want a positive duration", d)
	}
	c, done, err := p.dialFor(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer done()
	buf := make([]byte, 256<<10)
	start := time.Now()
	if _, err := c.Write([]byte{sinkMagic}); err != nil {
		return 0, p.failed(ctx, "send to", addr, err)
	}
	end := start.Add(d)
	if dl, ok := ctx.Deadline(); !ok || end.Before(dl) {
		_ = c.SetWriteDeadline(end)
	}
	for {
		_, err := c.Write(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil && !time.Now().Before(end) {
			break
		}
		return 0, p.failed(ctx, "send to", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(dl)
	} else {
		_ = c.SetWriteDeadline(time.Time{})
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, p.failed(ctx, "close the stream to", addr, err)
	}
	var count [8]byte
	if _, err := io.ReadFull(c, count[:]); err != nil {
		return 0, p.failed(ctx, "read the byte count of the sink at", addr, err)
	}
	elapsed := time.Since(start)
	return float64(binary.BigEndian.Uint64(count[:])) * 8 / elapsed.Seconds(), nil
}

// Latency does n one-byte request/response round trips over one TCP
// connection from the pod to an echo server (ServeEcho or ServeSink) at
// addr and returns the median and the 99th percentile (nearest rank).
func (p *Pod) Latency(ctx context.Context, addr netip.AddrPort, n int) (p50, p99 time.Duration, err error) {
	rtts, err := p.RoundTrips(ctx, addr, n)
	if err != nil {
		return 0, 0, err
	}
	return Percentile(rtts, 0.50), Percentile(rtts, 0.99), nil
}

// RoundTrips does n one-byte request/response round trips over one TCP
// connection from the pod to an echo server (ServeEcho or ServeSink) at
// addr and returns each one's time, in order.
func (p *Pod) RoundTrips(ctx context.Context, addr netip.AddrPort, n int) ([]time.Duration, error) {
	if n < 1 {
		return nil, fmt.Errorf("netlab: latency of %d round trips: want at least one", n)
	}
	c, done, err := p.dialFor(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer done()
	rtts := make([]time.Duration, n)
	req, resp := []byte{'x'}, []byte{0}
	for i := range rtts {
		t := time.Now()
		if _, err := c.Write(req); err != nil {
			return nil, p.failed(ctx, fmt.Sprintf("round trip %d: send to", i), addr, err)
		}
		if _, err := io.ReadFull(c, resp); err != nil {
			return nil, p.failed(ctx, fmt.Sprintf("round trip %d: read the reply of", i), addr, err)
		}
		rtts[i] = time.Since(t)
		if resp[0] != req[0] {
			return nil, fmt.Errorf("pod %s: round trip %d: %s replied %q to %q", p, i, addr, resp, req)
		}
	}
	return rtts, nil
}

// Percentile returns the q-quantile (0 < q <= 1, nearest rank) of ds, which
// it sorts; 0 if ds is empty.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[max(int(math.Ceil(q*float64(len(ds))))-1, 0)]
}
