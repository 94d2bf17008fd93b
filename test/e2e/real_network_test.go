package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// Cross-cluster pod traffic on the real-node bed (issue 33): Services to
// offloaded pods, offloaded pods to the consumer's Services, a gateway
// restart under traffic, and large packets over a 1400-byte underlay. Every
// request is made by an agnhost netexec pod's /dial endpoint (it resolves
// the name with the pod's DNS, opens a new connection per try and says who
// answered), reached with kubectl port-forward; the servers are agnhost
// netexec pods whose /hostname is their pod's name.

// realUnderlayMTU is the real bed's underlay MTU, as on several clouds:
// smaller than Ethernet's, so a data path that assumes 1500 bytes
// black-holes large packets.
const realUnderlayMTU = 1400

// netexecPort is where the specs' agnhost netexec pods serve HTTP.
const netexecPort = 8080

// pinTo requires the node named node (a real node or a virtual node).
func pinTo(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
}

func netexecSpec(affinity *corev1.Affinity) corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Affinity:                      affinity,
		Containers: []corev1.Container{{
			Name: "netexec", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
			Args:           []string{"netexec", fmt.Sprintf("--http-port=%d", netexecPort)},
			Ports:          []corev1.ContainerPort{{ContainerPort: netexecPort}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(netexecPort)}}, PeriodSeconds: 1},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
		}},
	}
}

// createNetexecDeployment makes a Deployment of agnhost netexec pods
// labelled labels (its selector), optionally pinned to a node.
func createNetexecDeployment(ctx context.Context, c *testbed.Cluster, ns, name string, replicas int32, labels map[string]string, affinity *corev1.Affinity) {
	GinkgoHelper()
	Expect(c.Client.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: netexecSpec(affinity)},
		},
	})).To(Succeed())
}

// createNetexecPod makes one agnhost netexec pod, optionally pinned.
func createNetexecPod(ctx context.Context, c *testbed.Cluster, ns, name string, labels map[string]string, affinity *corev1.Affinity) {
	GinkgoHelper()
	Expect(c.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: netexecSpec(affinity)})).To(Succeed())
}

// createService makes a ClusterIP Service on port 80 to netexecPort of
// the pods labelled selector.
func createService(ctx context.Context, c *testbed.Cluster, ns, name string, selector map[string]string) {
	GinkgoHelper()
	Expect(c.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(netexecPort)}}},
	})).To(Succeed())
}

// waitReadyPods waits for n Running and Ready pods labelled selector in ns
// of c and returns their names.
func waitReadyPods(ctx context.Context, c *testbed.Cluster, ns string, selector map[string]string, n int) []string {
	GinkgoHelper()
	var names []string
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
		names = nil
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready {
				names = append(names, p.Name)
			}
		}
		g.Expect(names).To(HaveLen(n), "Ready pods %v in %s/%s", selector, c.Name, ns)
	}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return names
}

// waitServiceEndpoints waits for the Service's EndpointSlices in ns of c to
// list n ready endpoints: in the provider, those of the reflected Service.
func waitServiceEndpoints(ctx context.Context, c *testbed.Cluster, ns, svc string, n int) []string {
	GinkgoHelper()
	var addrs []string
	Eventually(func(g Gomega) {
		var s corev1.Service
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: svc}, &s)).To(Succeed(), "Service %s/%s in %s", ns, svc, c.Name)
		var slices discoveryv1.EndpointSliceList
		g.Expect(c.Client.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc})).To(Succeed())
		addrs = nil
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					addrs = append(addrs, ep.Addresses...)
				}
			}
		}
		g.Expect(addrs).To(HaveLen(n), "ready endpoints of Service %s/%s in %s", ns, svc, c.Name)
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	return addrs
}

// netexecClient is an agnhost netexec pod making requests for the spec,
// reached through kubectl port-forward (for an offloaded pod, through the
// virtual kubelet: not through the fabric under test).
type netexecClient struct {
	name string
	base string
}

func openNetexecClient(ctx context.Context, c *testbed.Cluster, ns, pod string) *netexecClient {
	GinkgoHelper()
	port, stop := framework.PortForward(ctx, c, ns, pod, netexecPort)
	DeferCleanup(stop)
	return &netexecClient{name: c.Name + "/" + ns + "/" + pod, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// dialAnswer is netexec's /dial answer: the body of each try's response,
// and each failed try's error.
type dialAnswer struct {
	Responses []string `json:"responses"`
	Errors    []string `json:"errors"`
}

// dial has the client GET http://host:80/<request> tries times, each over
// a new connection, with a 5 s timeout each.
func (n *netexecClient) dial(ctx context.Context, host, request string, tries int) (dialAnswer, error) {
	return n.dialPort(ctx, host, 80, request, tries)
}

// dialPort is dial to another port.
func (n *netexecClient) dialPort(ctx context.Context, host string, port int, request string, tries int) (dialAnswer, error) {
	q := url.Values{"host": {host}, "port": {fmt.Sprint(port)}, "protocol": {"http"}, "request": {request}, "tries": {fmt.Sprint(tries)}}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(tries)*6*time.Second+20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+"/dial?"+q.Encode(), nil)
	if err != nil {
		return dialAnswer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return dialAnswer{}, fmt.Errorf("%s: /dial %s: %w", n.name, host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return dialAnswer{}, fmt.Errorf("%s: /dial %s: read: %w", n.name, host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return dialAnswer{}, fmt.Errorf("%s: /dial %s: %s: %s", n.name, host, resp.Status, strings.TrimSpace(string(body)))
	}
	var a dialAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return dialAnswer{}, fmt.Errorf("%s: /dial %s: decode %.200q: %w", n.name, host, body, err)
	}
	return a, nil
}

// expectHostnames has the client ask host for /hostname tries times, all
// of which must answer, and the answers must come from exactly want (pod
// names). The first success may take a while (a new Service, its
// reflection, the tunnel); then one strict round.
func (n *netexecClient) expectHostnames(ctx context.Context, host string, tries int, want []string) {
	GinkgoHelper()
	start := time.Now()
	// Until every pod has answered once: kube-proxy programs an endpoint
	// some time after the EndpointSlice lists it.
	seenOnce := map[string]bool{}
	Eventually(func(g Gomega) {
		a, err := n.dial(ctx, host, "hostname", 3*len(want))
		g.Expect(err).NotTo(HaveOccurred())
		for _, r := range a.Responses {
			seenOnce[r] = true
		}
		g.Expect(seenOnce).To(HaveLen(len(want)), "answers so far from %v (errors of the last round: %v)", seenOnce, a.Errors)
	}).WithContext(ctx).WithTimeout(3*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "%s reaching %s", n.name, host)
	GinkgoWriter.Printf("%s: every pod behind %s answered %s after the pods were Ready\n", n.name, host, time.Since(start).Round(100*time.Millisecond))
	a, err := n.dial(ctx, host, "hostname", tries)
	Expect(err).NotTo(HaveOccurred())
	Expect(a.Errors).To(BeEmpty(), "%s: %d tries of %s", n.name, tries, host)
	Expect(a.Responses).To(HaveLen(tries))
	seen := map[string]int{}
	for _, r := range a.Responses {
		seen[r]++
	}
	got := make([]string, 0, len(seen))
	for h := range seen {
		got = append(got, h)
	}
	Expect(got).To(ConsistOf(want), "%s: hostnames answering %s (counts %v)", n.name, host, seen)
	GinkgoWriter.Printf("%s: %d of %d tries of %s answered, by %v\n", n.name, len(a.Responses), tries, host, seen)
}

// realServiceToOffloadedPods: a consumer pod in a namespace that is not
// offloaded calls a ClusterIP Service whose 3 pods are all offloaded: the
// consumer's kube-proxy picks one of the offloaded pods' addresses (in the
// range standing for the provider), the route agent sends it to the
// gateway, the tunnel carries it, the provider's gateway translates it to
// the real pod.
func realServiceToOffloadedPods(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	remote := framework.CreateNamespace(ctx, consumer, "svc-remote")
	twin := framework.OffloadNamespace(ctx, consumer, remote, realProviderID)
	local := framework.CreateNamespace(ctx, consumer, "svc-client")

	labels := map[string]string{"app": "echo"}
	createNetexecDeployment(ctx, consumer, remote, "echo", 3, labels, nil)
	createService(ctx, consumer, remote, "echo", labels)
	createNetexecPod(ctx, consumer, local, "client", nil, nil)
	start := time.Now()
	echo := waitReadyPods(ctx, consumer, remote, labels, 3)
	waitReadyPods(ctx, consumer, local, nil, 1)
	GinkgoWriter.Printf("3 offloaded echo pods and the client Ready in %s\n", time.Since(start).Round(100*time.Millisecond))
	// They run on the provider's real node, under the same names.
	Expect(waitReadyPods(ctx, provider, twin, labels, 3)).To(ConsistOf(echo))
	addrs := waitServiceEndpoints(ctx, consumer, remote, "echo", 3)
	GinkgoWriter.Printf("the consumer's EndpointSlices of echo: %v\n", addrs)

	c := openNetexecClient(ctx, consumer, local, "client")
	c.expectHostnames(ctx, fmt.Sprintf("echo.%s.svc.cluster.local", remote), 50, echo)
}

// realOffloadedPodToHomeService: the consumer's Service, backed by pods
// that stay in the consumer (namespace offloaded with strategy Local, so
// the Service is reflected into its twin namespace), called by an
// offloaded pod of another offloaded namespace: by the twin namespace's
// names. The consumer's own names (<svc>.<ns>) resolve there only when the
// twin namespace has the same name: with the default mapping they do not.
func realOffloadedPodToHomeService(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	home := framework.CreateNamespace(ctx, consumer, "home")
	homeTwin := framework.OffloadNamespaceWith(ctx, consumer, home, realProviderID, ferryv1alpha1.PodOffloadingLocal)
	away := framework.CreateNamespace(ctx, consumer, "away")
	framework.OffloadNamespace(ctx, consumer, away, realProviderID)

	labels := map[string]string{"app": "home"}
	createNetexecDeployment(ctx, consumer, home, "home", 2, labels, nil)
	createService(ctx, consumer, home, "home", labels)
	createNetexecPod(ctx, consumer, away, "client", nil, nil)
	homePods := waitReadyPods(ctx, consumer, home, labels, 2)
	waitReadyPods(ctx, consumer, away, nil, 1)
	var p corev1.Pod
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: away, Name: "client"}, &p)).To(Succeed())
	Expect(p.Spec.NodeName).To(Equal(virtualNodeName(ctx, consumer, realProviderID)), "the client is offloaded")
	for _, n := range homePods {
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: home, Name: n}, &p)).To(Succeed())
		Expect(p.Spec.NodeName).To(Equal(consumer.RealNodes[0].Name), "home pod %s stays in the consumer", n)
	}
	addrs := waitServiceEndpoints(ctx, provider, homeTwin, "home", 2)
	GinkgoWriter.Printf("the provider's reflected EndpointSlices of home in %s: %v\n", homeTwin, addrs)

	c := openNetexecClient(ctx, consumer, away, "client")
	for _, name := range []string{"home." + homeTwin, "home." + homeTwin + ".svc.cluster.local"} {
		c.expectHostnames(ctx, name, 20, homePods)
	}
	By("the consumer's name home." + home + " does not resolve in the provider (the twin namespace is " + homeTwin + ")")
	_, err := c.dial(ctx, "home."+home, "hostname", 1)
	// NXDOMAIN in every search domain; the bed's CoreDNS has no upstream
	// for the name itself, so Go says "server misbehaving" there.
	Expect(err).To(MatchError(ContainSubstring("lookup home." + home + " on ")))

	By("with namespaceMappingStrategy EnforceSameName the twin namespace has the consumer's name, and so has the Service")
	same := framework.CreateNamespace(ctx, consumer, "same")
	Expect(consumer.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: same},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocal,
			NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{string(realProviderID)}}}}}}},
	})).To(Succeed())
	createNetexecDeployment(ctx, consumer, same, "home", 1, labels, nil)
	createService(ctx, consumer, same, "home", labels)
	samePods := waitReadyPods(ctx, consumer, same, labels, 1)
	waitServiceEndpoints(ctx, provider, same, "home", 1)
	c.expectHostnames(ctx, "home."+same, 10, samePods)
}

// realLocalAndRemoteService: a namespace offloaded with LocalAndRemote,
// its Service backed by 2 pods in the consumer and 1 offloaded; an
// offloaded pod of that namespace calls it by its short name and gets
// answers from all 3 (the consumer's through the tunnel, the provider's
// own directly), and so does a consumer pod of the namespace.
func realLocalAndRemoteService(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "mixed")
	twin := framework.OffloadNamespaceWith(ctx, consumer, ns, realProviderID, ferryv1alpha1.PodOffloadingLocalAndRemote)
	here, there := consumer.RealNodes[0].Name, virtualNodeName(ctx, consumer, realProviderID)

	createNetexecDeployment(ctx, consumer, ns, "mixed-home", 2, map[string]string{"app": "mixed", "side": "home"}, pinTo(here))
	createNetexecDeployment(ctx, consumer, ns, "mixed-away", 1, map[string]string{"app": "mixed", "side": "away"}, pinTo(there))
	createService(ctx, consumer, ns, "mixed", map[string]string{"app": "mixed"})
	createNetexecPod(ctx, consumer, ns, "client-away", map[string]string{"role": "client"}, pinTo(there))
	createNetexecPod(ctx, consumer, ns, "client-home", map[string]string{"role": "client"}, pinTo(here))
	backends := waitReadyPods(ctx, consumer, ns, map[string]string{"app": "mixed"}, 3)
	waitReadyPods(ctx, consumer, ns, map[string]string{"role": "client"}, 2)
	waitServiceEndpoints(ctx, consumer, ns, "mixed", 3)
	addrs := waitServiceEndpoints(ctx, provider, twin, "mixed", 3)
	GinkgoWriter.Printf("the provider's reflected EndpointSlices of mixed in %s: %v\n", twin, addrs)

	printPodIPs(ctx, consumer, ns)
	printPodIPs(ctx, provider, twin)
	for _, pod := range []string{"client-away", "client-home"} {
		c := openNetexecClient(ctx, consumer, ns, pod)
		endpoints := addrs
		if pod == "client-home" {
			endpoints = waitServiceEndpoints(ctx, consumer, ns, "mixed", 3)
		}
		// Each endpoint address, as this pod's cluster shows it, reaches
		// its own backend.
		byAddress := map[string]string{}
		for _, a := range endpoints {
			ans, err := c.dialPort(ctx, a, netexecPort, "hostname", 2)
			Expect(err).NotTo(HaveOccurred())
			Expect(ans.Errors).To(BeEmpty(), "%s: endpoint %s", c.name, a)
			Expect(ans.Responses).To(HaveLen(2))
			Expect(ans.Responses[0]).To(Equal(ans.Responses[1]))
			byAddress[a] = ans.Responses[0]
		}
		GinkgoWriter.Printf("%s: endpoint addresses answered by %v\n", c.name, byAddress)
		Expect(slices.Collect(maps.Values(byAddress))).To(ConsistOf(backends))
		c.expectHostnames(ctx, "mixed", 30, backends)
	}
}

// printPodIPs prints the pods of ns in c with their addresses and nodes.
func printPodIPs(ctx context.Context, c *testbed.Cluster, ns string) {
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		GinkgoWriter.Printf("%s: list pods of %s: %v\n", c.Name, ns, err)
		return
	}
	for _, p := range pods.Items {
		GinkgoWriter.Printf("%s: pod %s/%s on %s at %s\n", c.Name, ns, p.Name, p.Spec.NodeName, p.Status.PodIP)
	}
}

// realGatewayRestart: requests from a consumer pod to a Service of
// offloaded pods, one every 250 ms, while the gateway pod is deleted, on
// the consumer, then on the provider. The Deployment makes a new one; the
// requests must succeed again by themselves. It prints the pause.
func realGatewayRestart(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	remote := framework.CreateNamespace(ctx, consumer, "restart")
	framework.OffloadNamespace(ctx, consumer, remote, realProviderID)
	local := framework.CreateNamespace(ctx, consumer, "restart-client")
	labels := map[string]string{"app": "echo"}
	createNetexecDeployment(ctx, consumer, remote, "echo", 2, labels, nil)
	createService(ctx, consumer, remote, "echo", labels)
	createNetexecPod(ctx, consumer, local, "client", nil, nil)
	echo := waitReadyPods(ctx, consumer, remote, labels, 2)
	waitReadyPods(ctx, consumer, local, nil, 1)
	waitServiceEndpoints(ctx, consumer, remote, "echo", 2)
	c := openNetexecClient(ctx, consumer, local, "client")
	host := fmt.Sprintf("echo.%s.svc.cluster.local", remote)
	c.expectHostnames(ctx, host, 10, echo)

	for _, side := range []*testbed.Cluster{consumer, provider} {
		By("deleting the gateway pod of " + side.Name + " under traffic")
		type result struct {
			at, done time.Time // request sent, answer or error back
			ok       bool
		}
		var (
			mu      sync.Mutex
			results []result
		)
		loopCtx, stopLoop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			for loopCtx.Err() == nil {
				at := time.Now()
				a, err := c.dial(loopCtx, host, "hostname", 1)
				if loopCtx.Err() != nil {
					return
				}
				mu.Lock()
				results = append(results, result{at: at, done: time.Now(), ok: err == nil && len(a.Responses) == 1})
				mu.Unlock()
				select {
				case <-loopCtx.Done():
				case <-time.After(250 * time.Millisecond):
				}
			}
		})
		// Traffic flows before the deletion.
		time.Sleep(3 * time.Second)
		// The active replica (of two, active/passive).
		pods, err := side.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ferry-gateway,ferry.io/gateway-active=true"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(1))
		old := pods.Items[0]
		deleted := time.Now()
		Expect(side.Kube.CoreV1().Pods(charts.Namespace).Delete(ctx, old.Name, metav1.DeleteOptions{})).To(Succeed())

		// Recovery: the old pod gone (its data plane removed), a new one
		// Ready, and then 10 requests in a row answered.
		var gone, ready time.Time
		Eventually(func(g Gomega) {
			pods, err := side.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ferry-gateway"})
			g.Expect(err).NotTo(HaveOccurred())
			if gone.IsZero() {
				g.Expect(pods.Items).NotTo(ContainElement(HaveField("Name", old.Name)), "the deleted gateway pod of %s", side.Name)
				gone = time.Now()
			}
			if ready.IsZero() {
				g.Expect(pods.Items).To(HaveLen(2))
				g.Expect(pods.Items).To(HaveEach(HaveField("Status.ContainerStatuses", ConsistOf(HaveField("Ready", true)))), "a new gateway pod of %s, Ready", side.Name)
				ready = time.Now()
			}
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for i := len(results) - 1; i >= 0 && results[i].at.After(ready) && results[i].ok; i-- {
				n++
			}
			g.Expect(n).To(BeNumerically(">=", 10), "requests answered in a row since the new gateway pod of %s is Ready", side.Name)
		}).WithContext(ctx).WithTimeout(6 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		stopLoop()
		wg.Wait()

		// The pause: the longest time between two answers, the second
		// after the deletion (at rest, about the loop's 250 ms and one
		// request); a request that is late but answered (a retransmitted
		// SYN) counts as much as one unanswered.
		var pause, rest time.Duration
		var lastDone time.Time
		failed, after := 0, 0
		for _, r := range results {
			if !r.at.Before(deleted) {
				after++
				if !r.ok {
					failed++
				}
			}
			if !r.ok {
				continue
			}
			if !lastDone.IsZero() {
				gap := r.done.Sub(lastDone)
				if r.done.After(deleted) {
					pause = max(pause, gap)
				} else {
					rest = max(rest, gap)
				}
			}
			lastDone = r.done
		}
		rel := func(t time.Time) string { return "+" + t.Sub(deleted).Round(100*time.Millisecond).String() }
		GinkgoWriter.Printf("gateway of %s deleted at +0: old pod gone %s, new pod Ready %s; PAUSE %s without an answer (at rest at most %s); %d of %d requests since the deletion unanswered\n",
			side.Name, rel(gone), rel(ready), pause.Round(10*time.Millisecond), rest.Round(10*time.Millisecond), failed, after)
	}
	c.expectHostnames(ctx, host, 10, echo)
}

// realLargePackets: over the 1400-byte underlay, requests and answers of
// 1400 bytes and of 64 KiB both ways: a consumer pod to an offloaded pod's
// Service, and an offloaded pod to a consumer pod's Service (reflected).
// Each request's URL carries the message and the answer echoes it, so full
// segments cross the tunnel in both directions of each connection.
func realLargePackets(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "mtu")
	twin := framework.OffloadNamespaceWith(ctx, consumer, ns, realProviderID, ferryv1alpha1.PodOffloadingLocalAndRemote)
	here, there := consumer.RealNodes[0].Name, virtualNodeName(ctx, consumer, realProviderID)
	createNetexecPod(ctx, consumer, ns, "home", map[string]string{"app": "home"}, pinTo(here))
	createNetexecPod(ctx, consumer, ns, "away", map[string]string{"app": "away"}, pinTo(there))
	createService(ctx, consumer, ns, "home", map[string]string{"app": "home"})
	createService(ctx, consumer, ns, "away", map[string]string{"app": "away"})
	waitReadyPods(ctx, consumer, ns, map[string]string{"app": "home"}, 1)
	waitReadyPods(ctx, consumer, ns, map[string]string{"app": "away"}, 1)
	waitServiceEndpoints(ctx, consumer, ns, "away", 1)
	waitServiceEndpoints(ctx, provider, twin, "home", 1)

	home, away := openNetexecClient(ctx, consumer, ns, "home"), openNetexecClient(ctx, consumer, ns, "away")
	for _, dir := range []struct {
		from   *netexecClient
		to     string
		answer string
	}{{home, "away", "away"}, {away, "home", "home"}} {
		dir.from.expectHostnames(ctx, dir.to, 3, []string{dir.answer})
		for _, size := range []int{realUnderlayMTU, 64 << 10} {
			msg := strings.Repeat("0123456789abcdef", size/16+1)[:size]
			start := time.Now()
			a, err := dir.from.dial(ctx, dir.to, "echo?msg="+msg, 3)
			Expect(err).NotTo(HaveOccurred())
			Expect(a.Errors).To(BeEmpty(), "%s → %s, %d bytes each way", dir.from.name, dir.to, size)
			Expect(a.Responses).To(HaveLen(3))
			for _, r := range a.Responses {
				Expect(r).To(HaveLen(size))
				Expect(r == msg).To(BeTrue(), "%s → %s: the %d-byte answer differs from the request", dir.from.name, dir.to, size)
			}
			GinkgoWriter.Printf("%s → %s: 3 requests of %d bytes echoed in %s\n", dir.from.name, dir.to, size, time.Since(start).Round(time.Millisecond))
		}
	}
}
