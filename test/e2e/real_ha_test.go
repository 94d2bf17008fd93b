package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/fabric/gateway"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// netexecUDPPort is agnhost netexec's default UDP port (it answers
// "hostname" with its pod's name).
const netexecUDPPort = 8081

// dialUDP has the client send one UDP "hostname" request to host:port and
// wait for the answer (netexec's own timeout, a few seconds).
func (n *netexecClient) dialUDP(ctx context.Context, host string, port int) bool {
	q := url.Values{"host": {host}, "port": {fmt.Sprint(port)}, "protocol": {"udp"}, "request": {"hostname"}, "tries": {"1"}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/dial?"+q.Encode(), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	var a dialAnswer
	if json.NewDecoder(resp.Body).Decode(&a) != nil {
		return false
	}
	return len(a.Responses) == 1
}

// activeGatewayPod is the pod labelled active, and the Lease's holder.
func activeGatewayPod(ctx context.Context, c *testbed.Cluster) (pod, holder string) {
	GinkgoHelper()
	pods, err := c.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ferry-gateway," + gateway.LabelActive + "=true"})
	Expect(err).NotTo(HaveOccurred())
	if len(pods.Items) == 1 {
		pod = pods.Items[0].Name
	}
	var l coordinationv1.Lease
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: charts.Namespace, Name: gateway.DefaultLeaseName}, &l); err == nil && l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return pod, holder
}

// gatewayPID finds the ferry-gateway process of pod on the cluster's real
// node (its environment names the pod).
func gatewayPID(c *testbed.Cluster, pod string) int {
	GinkgoHelper()
	for _, n := range c.RealNodes {
		for _, pid := range n.PIDs() {
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !bytes.Contains(cmd, []byte("ferry-gateway")) || bytes.Contains(cmd, []byte("route-agent")) {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err == nil && slices.Contains(strings.Split(string(env), "\x00"), "POD_NAME="+pod) {
				return pid
			}
		}
	}
	Fail(fmt.Sprintf("no ferry-gateway process of pod %s on %s's real node", pod, c.Name))
	return 0
}

// realGatewayFailover: two gateway replicas on each side (one real node:
// both on it, behind the NodePort). Under UDP requests from a consumer
// pod to an offloaded pod (one every 100 ms, each a new socket, none
// waiting for another), the active gateway's container is killed (SIGKILL
// of its process) once on each side: the kubelet restarts it, and either
// it (same pod, same name) or the passive replica holds the Lease next.
// Then the active pod is deleted once on each side: the passive takes the
// Lease, labels its pod (the Service's endpoint moves, kube-proxy's UDP
// conntrack entry to the old pod with it) and handshakes with the peer,
// which follows. It prints each pause; only 10 s is asserted.
func realGatewayFailover(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	remote := framework.CreateNamespace(ctx, consumer, "failover")
	framework.OffloadNamespace(ctx, consumer, remote, realProviderID)
	local := framework.CreateNamespace(ctx, consumer, "failover-client")
	createNetexecPod(ctx, consumer, remote, "echo", map[string]string{"app": "echo"}, nil)
	createNetexecPod(ctx, consumer, local, "client", nil, nil)
	waitReadyPods(ctx, consumer, remote, map[string]string{"app": "echo"}, 1)
	waitReadyPods(ctx, consumer, local, nil, 1)
	var echo corev1.Pod
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: remote, Name: "echo"}, &echo)).To(Succeed())
	c := openNetexecClient(ctx, consumer, local, "client")
	Eventually(func() bool { return c.dialUDP(ctx, echo.Status.PodIP, netexecUDPPort) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(BeTrue())

	var mu sync.Mutex
	var answered []time.Time
	loopCtx, stopLoops := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// A request every 100 ms, each on its own: one sent while the path is
	// down waits out netexec's timeout, but does not hold up those after.
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-tick.C:
			}
			wg.Go(func() {
				if c.dialUDP(loopCtx, echo.Status.PodIP, netexecUDPPort) {
					mu.Lock()
					answered = append(answered, time.Now())
					mu.Unlock()
				}
			})
		}
	})
	defer func() { stopLoops(); wg.Wait() }()
	lastAnswer := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if len(answered) == 0 {
			return time.Time{}
		}
		return slices.MaxFunc(answered, func(a, b time.Time) int { return a.Compare(b) })
	}
	longestGap := func(from time.Time) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		ts := slices.Clone(answered)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		var gap time.Duration
		for i := 1; i < len(ts); i++ {
			if ts[i].After(from) {
				gap = max(gap, ts[i].Sub(ts[i-1]))
			}
		}
		return gap
	}

	var pauses []time.Duration
	for round := range 4 {
		side, peer := []*testbed.Cluster{provider, consumer}[round%2], []*testbed.Cluster{consumer, provider}[round%2]
		// First the container killed (the kubelet restarts it at once, and
		// the restarted replica, in the same pod under the same name, may
		// take its Lease back before the passive can), then the pod
		// deleted (SIGTERM: it tears down and releases the Lease, and the
		// passive takes over).
		kill := round < 2
		how := map[bool]string{true: "killing the active gateway container", false: "deleting the active gateway pod"}[kill]
		By(fmt.Sprintf("%s of %s (failover %d)", how, side.Name, round+1))
		// Both replicas Ready, one active.
		var active string
		Eventually(func(g Gomega) {
			pods, err := side.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ferry-gateway"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(2))
			g.Expect(pods.Items).To(HaveEach(HaveField("Status.ContainerStatuses", ConsistOf(HaveField("Ready", true)))))
			pod, holder := activeGatewayPod(ctx, side)
			g.Expect(pod).NotTo(BeEmpty())
			g.Expect(holder).To(Equal(pod))
			active = pod
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		time.Sleep(2 * time.Second) // traffic at rest
		var pid int
		if kill {
			pid = gatewayPID(side, active)
		}
		killed := time.Now()
		if kill {
			Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		} else {
			Expect(side.Kube.CoreV1().Pods(charts.Namespace).Delete(ctx, active, metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(lastAnswer).WithContext(ctx).WithTimeout(10*time.Second).WithPolling(10*time.Millisecond).
			Should(BeTemporally(">", killed.Add(50*time.Millisecond)), "no answer within 10 s of killing %s's active gateway %s", side.Name, active)
		time.Sleep(2 * time.Second)
		pause := longestGap(killed)
		// The Service's endpoints follow the new holder a moment after the
		// traffic does when the machine is loaded.
		Eventually(func(g Gomega) {
			pod, holder := activeGatewayPod(ctx, side)
			if !kill {
				g.Expect(holder).NotTo(Equal(active), "the passive replica took over from the deleted pod")
			}
			g.Expect(pod).To(Equal(holder), "the Service selects the holder's pod, and no other")
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		_, holder := activeGatewayPod(ctx, side)
		// The new active publishes itself in the NetworkConfig's status,
		// which can come a little after traffic resumed under load.
		Eventually(func(g Gomega) {
			var nc ferryv1alpha1.NetworkConfig
			g.Expect(side.Client.Get(ctx, client.ObjectKey{Namespace: charts.Namespace, Name: side.Name}, &nc)).To(Succeed())
			g.Expect(nc.Status.Gateway).NotTo(BeNil())
			g.Expect(nc.Status.Gateway.Replica).To(Equal(holder), "the NetworkConfig names the active replica")
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("failover %d (%s): %s's %s, then %s active (peer %s followed); PAUSE %s\n", round+1, how, side.Name, active, holder, peer.Name, pause.Round(10*time.Millisecond))
		pauses = append(pauses, pause)
	}
	slices.Sort(pauses)
	summary := fmt.Sprintf("real nodes: flow pause over %d failovers (two SIGKILLs of the active gateway container, two deletions of its pod; UDP requests every 100 ms): p50 %s max %s",
		len(pauses), percentile(pauses, 0.5).Round(10*time.Millisecond), pauses[len(pauses)-1].Round(10*time.Millisecond))
	GinkgoWriter.Println(summary)
	AddReportEntry("gateway failover pause (real nodes)", summary)
}
