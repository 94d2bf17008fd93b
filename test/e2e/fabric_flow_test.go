package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/ferry-io/ferry/fabric/netns"
	"github.com/ferry-io/ferry/fabric/overlay"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/netlab"
)

// flow is one TCP connection exchanging small echoes, ten a second, for
// specs that disturb the path under it.
type flow struct {
	conn   net.Conn
	mu     sync.Mutex
	n      int
	last   time.Time
	gap    time.Duration
	failed error
	done   chan struct{}
}

func startFlow(ctx context.Context, from *netlab.Pod, to string, port uint16) *flow {
	GinkgoHelper()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := from.Dial(dctx, netip.AddrPortFrom(netip.MustParseAddr(to), port))
	Expect(err).NotTo(HaveOccurred(), "connect %s to %s:%d", from.Name, to, port)
	f := &flow{conn: conn, last: time.Now(), done: make(chan struct{})}
	go f.run()
	return f
}

func (f *flow) run() {
	defer close(f.done)
	msg := []byte(strings.Repeat("ferry-flow ", 6))
	buf := make([]byte, len(msg))
	for {
		// Long enough for a gateway restart and a new handshake.
		_ = f.conn.SetDeadline(time.Now().Add(90 * time.Second))
		if _, err := f.conn.Write(msg); err != nil {
			f.fail(err)
			return
		}
		if _, err := io.ReadFull(f.conn, buf); err != nil {
			f.fail(err)
			return
		}
		if string(buf) != string(msg) {
			f.fail(fmt.Errorf("echo came back as %q", buf))
			return
		}
		now := time.Now()
		f.mu.Lock()
		f.n++
		f.gap = max(f.gap, now.Sub(f.last))
		f.last = now
		f.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

func (f *flow) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil && !strings.Contains(err.Error(), "use of closed network connection") {
		f.failed = err
	}
}

func (f *flow) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func (f *flow) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *flow) maxGap() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gap
}

func (f *flow) stop() {
	_ = f.conn.Close()
	<-f.done
}

// inventory lists what ferry made in a lab cluster's gateway pod and
// nodes: links of the lab's prefix, routes of ferry's protocol, permanent
// neighbours, nftables tables.
func inventory(lab *netlab.Lab, c *netlab.Cluster, gw *netlab.Pod) string {
	GinkgoHelper()
	var b strings.Builder
	nss := map[string]*netns.Namespace{"gateway": gw.NS}
	for _, n := range c.Nodes {
		nss["node "+n.Name] = n.NS
	}
	for _, name := range slices.Sorted(maps.Keys(nss)) {
		ns := nss[name]
		inv, err := overlay.List(ns, framework.LinkPrefix(lab))
		Expect(err).NotTo(HaveOccurred())
		conn, err := nftables.New(nftables.WithNetNSFd(ns.Fd()))
		Expect(err).NotTo(HaveOccurred())
		tables, err := conn.ListTables()
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, t := range tables {
			names = append(names, t.Name)
		}
		fmt.Fprintf(&b, "%s: links %v routes %v neighbours %v tables %v\n", name, inv.Links, inv.Routes, inv.Neighbors, names)
	}
	return b.String()
}
