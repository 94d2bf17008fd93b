package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/fabric/gateway"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/netlab"
	"github.com/ferry-io/ferry/test/testbed"
)

// udpProbe sends a numbered datagram every interval from a lab pod to an
// echo in another and records when each reply came back, and every source
// address either end saw.
type udpProbe struct {
	conn    *net.UDPConn
	mu      sync.Mutex
	replies []time.Time
	sources map[string]int // reply sources at the client
	done    chan struct{}
}

// serveUDPEcho echoes datagrams on port in pod, counting their sources.
func serveUDPEcho(pod *netlab.Pod, port int) (sources func() map[string]int, stop func()) {
	GinkgoHelper()
	var conn net.PacketConn
	Expect(pod.NS.Do(func() (err error) {
		conn, err = net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", port))
		return err
	})).To(Succeed())
	var mu sync.Mutex
	seen := map[string]int{}
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			mu.Lock()
			seen[from.(*net.UDPAddr).IP.String()]++
			mu.Unlock()
			_, _ = conn.WriteTo(buf[:n], from)
		}
	}()
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}, func() { _ = conn.Close() }
}

func startUDPProbe(from *netlab.Pod, to netip.AddrPort, every time.Duration) *udpProbe {
	GinkgoHelper()
	var conn *net.UDPConn
	Expect(from.NS.Do(func() (err error) {
		conn, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		return err
	})).To(Succeed())
	p := &udpProbe{conn: conn, sources: map[string]int{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 8)
		for seq := uint64(0); ; seq++ {
			binary.BigEndian.PutUint64(buf, seq)
			if _, err := conn.Write(buf); err != nil && isClosed(err) {
				return
			}
			time.Sleep(every)
		}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			_, src, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if isClosed(err) {
					return
				}
				continue // ECONNREFUSED and the like while the path is down
			}
			now := time.Now()
			p.mu.Lock()
			p.replies = append(p.replies, now)
			p.sources[src.Addr().String()]++
			p.mu.Unlock()
		}
	}()
	return p
}

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// last is the time of the last reply.
func (p *udpProbe) last() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.replies) == 0 {
		return time.Time{}
	}
	return p.replies[len(p.replies)-1]
}

// longestGap is the longest time without a reply between from and to.
func (p *udpProbe) longestGap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gap time.Duration
	prev := time.Time{}
	for _, t := range p.replies {
		if t.Before(from) {
			prev = t
			continue
		}
		if t.After(to) {
			break
		}
		if !prev.IsZero() {
			gap = max(gap, t.Sub(prev))
		}
		prev = t
	}
	return gap
}

func (p *udpProbe) replySources() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.sources {
		out[k] = v
	}
	return out
}

func (p *udpProbe) stop() {
	_ = p.conn.Close()
	<-p.done
}

// klogTime matches the time of a klog line (I1126 22:05:32.873231 ...).
var klogTime = regexp.MustCompile(`^[IWE]\d{4} (\d\d:\d\d:\d\d\.\d{6}) `)

// logged is when, after since, a process's klog output last said what:
// "+1.234s" after since, or "?" when it did not.
func logged(log, what string, since time.Time) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], what) {
			continue
		}
		m := klogTime.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		t, err := time.Parse("15:04:05.000000", m[1])
		if err != nil {
			continue
		}
		y, mo, d := since.UTC().Date()
		at := time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
		if at.Before(since) {
			return "?"
		}
		return "+" + at.Sub(since).Round(time.Millisecond).String()
	}
	return "?"
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// The gateway HA specs run two gateway replicas per cluster in the netns
// lab, active/passive by the Lease, and kill the active one under a
// continuous probe between pods of two clusters.
var _ = Describe("Gateway high availability", Label("fabric", "ha"), Ordered, func() {
	var consumer, eu *testbed.Cluster
	var lab *netlab.Lab
	labs := map[string]*netlab.Cluster{}
	gwPods := map[string][]*netlab.Pod{}
	replicas := map[string][]*framework.Proc{}
	clusters := map[string]*testbed.Cluster{}

	holder := func(ctx context.Context, c *testbed.Cluster) string {
		var l coordinationv1.Lease
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: gateway.DefaultLeaseName}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// tunnelsUp counts the replicas of a cluster with their WireGuard link.
	tunnelsUp := func(name string) (int, error) {
		n := 0
		for i, pod := range gwPods[name] {
			h, err := pod.NS.NetlinkHandle()
			if err != nil {
				return 0, err
			}
			_, err = h.LinkByName(framework.GatewayReplicaPrefix(lab, clusters[name], i) + "-wg")
			h.Close()
			if err == nil {
				n++
			}
		}
		return n, nil
	}

	// watchTwoUp samples every cluster's replicas every 2 ms until the
	// returned function is called, which says when two had the tunnel up.
	watchTwoUp := func(ctx context.Context) func() []string {
		var mu sync.Mutex
		var twoUp []string
		watchCtx, stop := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for watchCtx.Err() == nil {
				for _, name := range []string{"consumer", "eu"} {
					if n, err := tunnelsUp(name); err == nil && n > 1 {
						mu.Lock()
						twoUp = append(twoUp, fmt.Sprintf("%s at %s", name, time.Now().Format(time.StampMilli)))
						mu.Unlock()
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		return func() []string {
			stop()
			<-watched
			mu.Lock()
			defer mu.Unlock()
			return twoUp
		}
	}
	var gwBin string

	BeforeAll(func(ctx context.Context) {
		if !netlab.Isolated() {
			Skip("the data path needs root: the suite then runs in a network namespace of its own (netlab.Main)")
		}
		cs := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
		)
		consumer, eu = cs[0], cs[1]
		var err error
		lab, err = netlab.New(netlab.Prefix())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(lab.Close)
		gwBin = framework.BuildGateway(ctx)
		for _, c := range cs {
			clusters[c.Name] = c
			framework.ApplyManifests(ctx, c, "base")
			framework.StartFerry(ctx, c, ferryv1alpha1.ClusterID(c.Name), framework.FerryOptions{})
			lc, err := lab.AddCluster(c.Name, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/17"), netip.MustParsePrefix("10.244.128.0/17")})
			Expect(err).NotTo(HaveOccurred())
			labs[c.Name] = lc
			for i, ip := range []string{"10.244.255.250", "10.244.255.251"} {
				gw, err := lc.AddGateway(1, fmt.Sprintf("gw%d", i), netip.MustParseAddr(ip))
				Expect(err).NotTo(HaveOccurred())
				gwPods[c.Name] = append(gwPods[c.Name], gw)
				replicas[c.Name] = append(replicas[c.Name], framework.StartGatewayReplica(ctx, gwBin, c, ferryv1alpha1.ClusterID(c.Name), lab, gw, i))
			}
			for _, n := range lc.Nodes {
				framework.StartRouteAgent(ctx, gwBin, c, ferryv1alpha1.ClusterID(c.Name), lab, n)
			}
		}
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", eu.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("fails over to the passive replica when the active one is killed, pausing a flow briefly, never with two active", func(ctx context.Context) {
		network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		web, err := labs["consumer"].AddPod(0, "web", netip.MustParseAddr("10.244.1.10"))
		Expect(err).NotTo(HaveOccurred())
		api, err := labs["eu"].AddPod(0, "api", netip.MustParseAddr("10.244.1.20"))
		Expect(err).NotTo(HaveOccurred())
		serverSources, stopServer := serveUDPEcho(api, 9000)
		DeferCleanup(stopServer)
		apiAddr := netip.MustParseAddr(network.ProviderPodIP(api.IP.String()))
		webSeen := network.ConsumerPodIP(web.IP.String())

		By("one replica of each cluster active, the flow going")
		probe := startUDPProbe(web, netip.AddrPortFrom(apiAddr, 9000), 10*time.Millisecond)
		DeferCleanup(probe.stop)
		Eventually(func() time.Duration { return time.Since(probe.last()) }).WithContext(ctx).WithTimeout(90*time.Second).
			Should(BeNumerically("<", 100*time.Millisecond), func() string {
				return fmt.Sprintf("holders: consumer %q, eu %q\n%s", holder(ctx, consumer), holder(ctx, eu), replicas["eu"][0].Log())
			})

		By("watching that no cluster ever has two replicas with the tunnel up")
		stopWatch := watchTwoUp(ctx)

		const failovers = 10
		var pauses []time.Duration
		for i := range failovers {
			name := []string{"eu", "consumer"}[i%2]
			c := clusters[name]
			active := holder(ctx, c)
			idx := slices.IndexFunc(gwPods[name], func(p *netlab.Pod) bool { return p.Name == active })
			Expect(idx).To(BeNumerically(">=", 0), "%s's lease holder %q is no replica", name, active)
			killed := time.Now()
			replicas[name][idx].Kill()
			Eventually(probe.last).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).
				Should(BeTemporally(">", killed), "the flow did not resume within 10 s of killing %s's active gateway %s; the other replica's log:\n%s",
					name, active, replicas[name][1-idx].Log())
			// Replies resumed; a second more shows the path stable.
			time.Sleep(time.Second)
			pause := probe.longestGap(killed.Add(-100*time.Millisecond), time.Now())
			// A reply in flight at the kill can count as resumed before the
			// takeover (about a lease duration after the kill): wait for it.
			var now string
			Eventually(func() string { now = holder(ctx, c); return now }).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).
				ShouldNot(Equal(active), "the lease still names the killed replica")
			took := slices.IndexFunc(gwPods[name], func(p *netlab.Pod) bool { return p.Name == now })
			GinkgoWriter.Printf("failover %d: killed %s's %s, %s took over (lease %s, tunnel %s after the kill); longest pause %s\n", i+1, name, active, now,
				logged(replicas[name][took].Log(), "Became the active gateway replica", killed), logged(replicas[name][took].Log(), "Opened the tunnel", killed), pause.Round(time.Millisecond))
			pauses = append(pauses, pause)
			// The killed replica comes back (as its pod's container would)
			// and stays passive.
			replicas[name][idx].Start()
			time.Sleep(1500 * time.Millisecond)
			Expect(holder(ctx, c)).To(Equal(now), "the restarted replica took the lease from the active one")
		}
		twoUp := stopWatch()
		slices.Sort(pauses)
		summary := fmt.Sprintf("flow pause over %d failovers (SIGKILL of the active, UDP probe every 10 ms): p50 %s p99 %s max %s",
			failovers, percentile(pauses, 0.5).Round(time.Millisecond), percentile(pauses, 0.99).Round(time.Millisecond), pauses[len(pauses)-1].Round(time.Millisecond))
		GinkgoWriter.Println(summary)
		AddReportEntry("gateway failover pause (netns)", summary)
		Expect(twoUp).To(BeEmpty(), "two replicas had the tunnel up")

		By("every packet through the switches translated: the echo saw only the consumer pod's remapped address, the probe only the eu pod's")
		Expect(serverSources()).To(HaveLen(1))
		Expect(serverSources()).To(HaveKey(webSeen))
		Expect(probe.replySources()).To(HaveLen(1))
		Expect(probe.replySources()).To(HaveKey(apiAddr.String()))
	})

	It("never has two replicas active while the active one is cut off from its API server, or flaps", func(ctx context.Context) {
		network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		web, api := labs["consumer"].Pod("web"), labs["eu"].Pod("api")
		Expect(web).NotTo(BeNil(), "needs the pods of the failover spec")
		_, stopServer := serveUDPEcho(api, 9001)
		DeferCleanup(stopServer)
		apiAddr := netip.MustParseAddr(network.ProviderPodIP(api.IP.String()))

		By("running eu's replicas through API proxies that can cut them off")
		proxies := make([]*framework.APIProxy, 2)
		for i, pod := range gwPods["eu"] {
			replicas["eu"][i].Stop(ctx)
			proxies[i] = framework.StartAPIProxy(eu, pod.Name)
			replicas["eu"][i] = framework.StartGatewayReplica(ctx, gwBin, eu, "eu", lab, pod, i, "--kubeconfig", proxies[i].Kubeconfig)
		}
		probe := startUDPProbe(web, netip.AddrPortFrom(apiAddr, 9001), 10*time.Millisecond)
		DeferCleanup(probe.stop)
		Eventually(func() time.Duration { return time.Since(probe.last()) }).WithContext(ctx).WithTimeout(60 * time.Second).
			Should(BeNumerically("<", 100*time.Millisecond))
		stopWatch := watchTwoUp(ctx)
		index := func(name string) int {
			return slices.IndexFunc(gwPods["eu"], func(p *netlab.Pod) bool { return p.Name == name })
		}

		By("cutting the active replica off from the API server")
		active := holder(ctx, eu)
		a := index(active)
		Expect(a).To(BeNumerically(">=", 0))
		cut := time.Now()
		proxies[a].Cut(true)
		Eventually(func() string { return holder(ctx, eu) }).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(10 * time.Millisecond).
			ShouldNot(Equal(active))
		Eventually(probe.last).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).Should(BeTemporally(">", cut.Add(100*time.Millisecond)),
			"the flow did not resume after the partition; new active's log:\n%s", replicas["eu"][1-a].Log())
		time.Sleep(time.Second)
		n, err := tunnelsUp("eu")
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1), "the cut-off replica removed its tunnel, the other has one")
		GinkgoWriter.Printf("partition of eu's active %s: longest pause %s (cut-off replica: %s after the cut)\n", active,
			probe.longestGap(cut.Add(-100*time.Millisecond), time.Now()).Round(time.Millisecond), logged(replicas["eu"][a].Log(), "No longer the active gateway replica", cut))
		proxies[a].Cut(false)
		time.Sleep(3 * time.Second)
		Expect(holder(ctx, eu)).NotTo(Equal(active), "the healed replica stays passive")

		By("flapping each replica's API connection, shorter and longer than the renew deadline")
		for round := range 12 {
			i := index(holder(ctx, eu))
			if i < 0 {
				i = round % 2
			}
			down := []time.Duration{300 * time.Millisecond, 900 * time.Millisecond, 1200 * time.Millisecond}[round%3]
			proxies[i].Cut(true)
			time.Sleep(down)
			proxies[i].Cut(false)
			time.Sleep(400 * time.Millisecond)
		}
		for _, p := range proxies {
			p.Cut(false)
		}
		twoUp := stopWatch()
		Expect(twoUp).To(BeEmpty(), "two replicas had the tunnel up")
		last := time.Now()
		Eventually(probe.last).WithContext(ctx).WithTimeout(10*time.Second).Should(BeTemporally(">", last), "the flow resumes once the flapping ends")
	})
})
