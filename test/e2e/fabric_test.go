package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/fabric"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/netlab"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
)

// The fabric specs run the network fabric's control plane on three real
// clusters that all use the test bed's pod CIDR 10.244.0.0/16 and service
// CIDR 10.96.0.0/16, as real clusters do: discovery (the service CIDR read
// from the API server), the NetworkConfig exchange over the peering's
// credential, each cluster's IPAM, and the translation of pod IPs and
// EndpointSlice addresses by the virtual kubelet.
var _ = Describe("Network fabric", Label("fabric"), Ordered, func() {
	var consumer, eu, us *testbed.Cluster
	ferries := map[string]*framework.Ferry{}
	// The data path, when the suite runs in a network namespace of its own.
	var lab *netlab.Lab
	var usBefore string
	labs := map[string]*netlab.Cluster{}
	gwPods := map[string]*netlab.Pod{}
	gateways := map[string]*framework.Proc{}
	// The consumer pod of the data path specs, and where it reaches eu's
	// and us's pods.
	var web *netlab.Pod
	var euAddr, usAddr string
	health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
	start := func(ctx context.Context, c *testbed.Cluster) {
		ferries[c.Name] = framework.StartFerry(ctx, c, ferryv1alpha1.ClusterID(c.Name), framework.FerryOptions{Health: health})
	}
	peer := func(ctx context.Context, p *testbed.Cluster) {
		GinkgoHelper()
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", p.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
	}
	allocations := func(ctx context.Context, c *testbed.Cluster) map[string]string {
		GinkgoHelper()
		var cm corev1.ConfigMap
		Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: fabricctrl.IPAMConfigMap}, &cm)).To(Succeed())
		var table map[string]string
		Expect(json.Unmarshal([]byte(cm.Data["allocations"]), &table)).To(Succeed())
		return table
	}
	needLab := func() {
		if lab == nil {
			Skip("the data path needs root: the suite then runs in a network namespace of its own (netlab.Main)")
		}
	}
	// runPod creates a pod on node and waits for its IP (kwok's), as the
	// consumer shows it.
	runPod := func(ctx context.Context, ns, name, node string, labels map[string]string) *corev1.Pod {
		GinkgoHelper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: name, Image: "registry.k8s.io/pause:3.10"}},
				Tolerations: []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}}},
		}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		return pod
	}
	// remotePodIP is the IP of an offloaded pod in its provider.
	remotePodIP := func(ctx context.Context, provider *testbed.Cluster, twin, name string) netip.Addr {
		GinkgoHelper()
		var remote corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, &remote)).To(Succeed())
			g.Expect(remote.Status.PodIP).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		return netip.MustParseAddr(remote.Status.PodIP)
	}
	localNode := func(ctx context.Context) string {
		GinkgoHelper()
		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes, client.MatchingLabels{testbed.LabelNodePool: "local"})).To(Succeed())
		Expect(nodes.Items).NotTo(BeEmpty())
		return nodes.Items[0].Name
	}
	tunnelUp := func(ctx context.Context, provider string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: provider}, &fc)).To(Succeed())
			c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterNetworkReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "gateway log:\n%s", gateways["consumer"].Log())
	}
	echo := func(ctx context.Context, from *netlab.Pod, to string, port uint16) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return from.Echo(ctx, netip.AddrPortFrom(netip.MustParseAddr(to), port), []byte("ferry "+from.Name+" to "+to))
	}
	tail := func(s string, n int) string {
		lines := strings.Split(s, "\n")
		return strings.Join(lines[max(0, len(lines)-n):], "\n")
	}
	prefix := func(s string) netip.Prefix {
		GinkgoHelper()
		p, err := netip.ParsePrefix(s)
		Expect(err).NotTo(HaveOccurred())
		return p
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
			testbed.Options{Name: "us", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
		)
		consumer, eu, us = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			Expect(c.PodCIDR()).To(Equal("10.244.0.0/16"), "the specs need one pod CIDR everywhere")
			framework.ApplyManifests(ctx, c, "base")
			start(ctx, c)
		}
		if netlab.Isolated() {
			// Each cluster's nodes and pods as network namespaces: two nodes
			// (kwok gives pod IPs from the low half, the gateway sits on the
			// other node), a gateway pod with a WAN interface, and a route
			// agent per node.
			var err error
			lab, err = netlab.New(netlab.Prefix())
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(lab.Close)
			gwBin := framework.BuildGateway(ctx)
			for _, c := range clusters {
				lc, err := lab.AddCluster(c.Name, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/17"), netip.MustParsePrefix("10.244.128.0/17")})
				Expect(err).NotTo(HaveOccurred())
				gw, err := lc.AddGateway(1, "gw", netip.MustParseAddr("10.244.255.250"))
				Expect(err).NotTo(HaveOccurred())
				labs[c.Name], gwPods[c.Name] = lc, gw
				gateways[c.Name] = framework.StartGateway(ctx, gwBin, c, ferryv1alpha1.ClusterID(c.Name), lab, gw, "--key-rotation-grace=6s")
				for _, n := range lc.Nodes {
					framework.StartRouteAgent(ctx, gwBin, c, ferryv1alpha1.ClusterID(c.Name), lab, n)
				}
			}
			usBefore = inventory(lab, labs["us"], gwPods["us"])
		}
		peer(ctx, eu)
	})

	It("maps two clusters with the same pod CIDR apart, translating pod IPs and endpoints both ways", func(ctx context.Context) {
		By("discovering each cluster's own networks")
		var local ferryv1alpha1.NetworkConfig
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "consumer"}, &local)).To(Succeed())
			g.Expect(local.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelNetworkConfig, ferryv1alpha1.NetworkConfigLocal))
			g.Expect(meta.IsStatusConditionTrue(local.Status.Conditions, ferryv1alpha1.NetworkConfigDiscovered)).To(BeTrue())
			g.Expect(local.Spec.ExternalCIDR).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(local.Spec.PodCIDR).To(Equal("10.244.0.0/16"))
		Expect(local.Spec.ServiceCIDR).To(Equal("10.96.0.0/16"), "read from the API server's ServiceCIDR")
		Expect(local.Spec.APIServer).To(HaveValue(Equal(ferryv1alpha1.APIServerEndpoint{Address: "10.96.0.1", Port: 443})))
		external := prefix(local.Spec.ExternalCIDR)
		Expect(external.Bits()).To(Equal(16))

		By("mapping the provider's pods away from every local range, and learning where the provider maps ours")
		network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		euPods := network.ProviderPods.To
		Expect(network.ProviderPods.From.String()).To(Equal("10.244.0.0/16"))
		for _, local := range []string{"10.244.0.0/16", "10.96.0.0/16", local.Spec.ExternalCIDR} {
			Expect(fabric.Overlaps(euPods, prefix(local))).To(BeFalse(), "eu's pods mapped to %s, which overlaps %s", euPods, local)
		}
		var mine ferryv1alpha1.NetworkConfig
		Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &mine)).To(Succeed())
		Expect(mine.Status.RemappedPodCIDR).To(Equal(network.ConsumerPods.To.String()), "the consumer records what the provider decided")
		Expect(mine.Spec.ExternalCIDR).To(Equal(local.Spec.ExternalCIDR))
		var euLocal ferryv1alpha1.NetworkConfig
		Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "eu"}, &euLocal)).To(Succeed())
		if euLocal.Spec.ExternalCIDR != local.Spec.ExternalCIDR {
			Expect(network.ConsumerPods.To.String()).To(Equal(local.Spec.ExternalCIDR), "eu sees the consumer's pods at the consumer's external CIDR, which is free there")
		} else {
			Expect(fabric.Overlaps(network.ConsumerPods.To, prefix(euLocal.Spec.ExternalCIDR))).To(BeFalse(),
				"both clusters chose %s as external CIDR: eu maps the consumer elsewhere", euLocal.Spec.ExternalCIDR)
		}

		By("reporting NetworkReady once the gateway's tunnel is up (false while no gateway runs)")
		Eventually(func(g Gomega) {
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "eu"}, &fc)).To(Succeed())
			c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterNetworkReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring(euPods.String()))
			if lab == nil {
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal("GatewayNotReporting"))
			} else {
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
				g.Expect(c.Reason).To(Equal("TunnelUp"))
			}
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), func() string {
			if lab == nil {
				return ""
			}
			return "consumer gateway's log:\n" + gateways["consumer"].Log() + "\neu gateway's log:\n" + gateways["eu"].Log()
		})

		By("showing an offloaded pod's IP in the remapped CIDR, 1:1 with its provider IP")
		ns := framework.CreateNamespace(ctx, consumer, "net")
		twin := framework.OffloadNamespace(ctx, consumer, ns, "eu")
		virtualNode := peering.VirtualNodeName("eu")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api"},
			Spec: corev1.PodSpec{NodeName: virtualNode, Containers: []corev1.Container{{Name: "api", Image: "registry.k8s.io/pause:3.10"}},
				Tolerations: []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}}},
		}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		var remote corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "api"}, &remote)).To(Succeed())
			g.Expect(remote.Status.PodIP).To(HavePrefix("10.244."))
			g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(euPods.Contains(netip.MustParseAddr(pod.Status.PodIP))).To(BeTrue(), "pod IP %s outside %s", pod.Status.PodIP, euPods)
		Expect(pod.Status.PodIPs).To(Equal([]corev1.PodIP{{IP: pod.Status.PodIP}}))
		back, ok := network.ProviderPods.Inverse().TranslateString(pod.Status.PodIP)
		Expect(ok).To(BeTrue())
		Expect(back).To(Equal(remote.Status.PodIP), "the mapping is 1:1")

		By("pointing the remote pod at the consumer's API server by name")
		var shadow ferryv1alpha1.ShadowPod
		Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "api"}, &shadow)).To(Succeed())
		Expect(shadow.Spec.Template.Spec.HostAliases).To(ConsistOf(corev1.HostAlias{IP: network.APIServerAtProvider,
			Hostnames: []string{"kubernetes.default", "kubernetes.default.svc"}}))
		Expect(shadow.Spec.Template.Spec.Containers[0].Env).To(ContainElements(
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: "kubernetes.default"}, corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: "443"}))
		Expect(remote.Spec.HostAliases).To(Equal(shadow.Spec.Template.Spec.HostAliases), "the real pod has them too")
		api := netip.MustParseAddr(network.APIServerAtProvider)
		Expect(api.String()).NotTo(Equal("10.96.0.1"), "eu's own kubernetes Service has that address")

		By("reflecting a local endpoint into the CIDR the provider reaches the consumer's pods at")
		Expect(consumer.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "sql", Port: 5432, TargetPort: intstr.FromInt32(5432)}}}})).To(Succeed())
		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes, client.MatchingLabels{testbed.LabelNodePool: "local"})).To(Succeed())
		Expect(nodes.Items).NotTo(BeEmpty())
		localNode := nodes.Items[0].Name
		Expect(consumer.Client.Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "db-local", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.3.7"}, NodeName: &localNode},
				// Not a pod of the consumer: unreachable from the provider, left out.
				{Addresses: []string{"192.0.2.10"}, NodeName: &localNode},
			},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			var copyES discoveryv1.EndpointSlice
			g.Expect(eu.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "db-local"}, &copyES)).To(Succeed())
			g.Expect(copyES.Endpoints).To(HaveLen(1))
			g.Expect(copyES.Endpoints[0].Addresses).To(Equal([]string{network.ConsumerPodIP("10.244.3.7")}))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(network.ConsumerPods.To.Contains(netip.MustParseAddr(network.ConsumerPodIP("10.244.3.7")))).To(BeTrue())
	})

	It("carries packets between a consumer pod and offloaded pods, both ways, though both clusters use 10.244.0.0/16", func(ctx context.Context) {
		needLab()
		tunnelUp(ctx, "eu")
		network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		ns := framework.CreateNamespace(ctx, consumer, "path")
		twin := framework.OffloadNamespace(ctx, consumer, ns, "eu")

		By("running a consumer pod and an offloaded pod, each an echo server in its cluster's lab")
		webPod := runPod(ctx, ns, "web", localNode(ctx), map[string]string{"app": "web"})
		webNS, err := labs["consumer"].AddPod(0, "web", netip.MustParseAddr(webPod.Status.PodIP))
		Expect(err).NotTo(HaveOccurred())
		// The servers of this spec serve the later ones too; the lab stops
		// them when it closes.
		_, err = webNS.ServeEcho(8080)
		Expect(err).NotTo(HaveOccurred())
		api := runPod(ctx, ns, "api", peering.VirtualNodeName("eu"), nil)
		Expect(network.ProviderPods.To.Contains(netip.MustParseAddr(api.Status.PodIP))).To(BeTrue())
		real := remotePodIP(ctx, eu, twin, "api")
		back, ok := network.ProviderPods.Inverse().TranslateString(api.Status.PodIP)
		Expect(ok).To(BeTrue())
		Expect(back).To(Equal(real.String()))
		apiNS, err := labs["eu"].AddPod(0, "api", real)
		Expect(err).NotTo(HaveOccurred())
		_, err = apiNS.ServeEcho(8080)
		Expect(err).NotTo(HaveOccurred())

		By("connecting from the consumer pod to the offloaded pod at the IP its status shows")
		Eventually(func() error { return echo(ctx, webNS, api.Status.PodIP, 8080) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		web, euAddr = webNS, api.Status.PodIP

		By("connecting from the offloaded pod to the consumer pod through the reflected Service's EndpointSlice")
		Expect(consumer.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(8080)}}}})).To(Succeed())
		var reflected string
		Eventually(func(g Gomega) {
			var slices discoveryv1.EndpointSliceList
			g.Expect(eu.Client.List(ctx, &slices, client.InNamespace(twin), client.MatchingLabels{discoveryv1.LabelServiceName: "web"})).To(Succeed())
			for _, es := range slices.Items {
				for _, ep := range es.Endpoints {
					reflected = ep.Addresses[0]
				}
			}
			g.Expect(reflected).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(reflected).To(Equal(network.ConsumerPodIP(webPod.Status.PodIP)))
		Eventually(func() error { return echo(ctx, apiNS, reflected, 8080) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("reporting the tunnel: handshake, round trip and metrics-worthy state on the peer's NetworkConfig")
		Eventually(func(g Gomega) {
			var nc ferryv1alpha1.NetworkConfig
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "eu"}, &nc)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(nc.Status.Conditions, ferryv1alpha1.NetworkConfigTunnelUp)).To(BeTrue())
			g.Expect(nc.Status.Tunnel).NotTo(BeNil())
			g.Expect(nc.Status.Tunnel.LastHandshakeTime).NotTo(BeNil())
			g.Expect(nc.Status.Tunnel.RoundTripTime).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), func() string {
			// Seen once in CI (not reproduced): the data path worked, the
			// report did not come. Say what the gateway wrote and logged.
			var nc ferryv1alpha1.NetworkConfig
			err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "eu"}, &nc)
			return fmt.Sprintf("NetworkConfig eu (err %v): conditions %+v, tunnel %+v\nconsumer gateway log:\n%s",
				err, nc.Status.Conditions, nc.Status.Tunnel, tail(gateways["consumer"].Log(), 60))
		})
		out, err := ferryctl(ctx, "status", "--kubeconfig", consumer.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`eu\s.*\bup\b`))
	})

	It("gives two providers with the same pod CIDR disjoint ranges, shown by ferryctl status", func(ctx context.Context) {
		peer(ctx, us)
		euNet := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		usNet := framework.WaitPeerNetwork(ctx, consumer, "consumer", "us")
		Expect(fabric.Overlaps(euNet.ProviderPods.To, usNet.ProviderPods.To)).To(BeFalse(), "eu at %s, us at %s", euNet.ProviderPods.To, usNet.ProviderPods.To)
		Expect(euNet.APIServerAtProvider).NotTo(BeEmpty())
		table := allocations(ctx, consumer)
		Expect(table).To(HaveKeyWithValue("pods/eu", euNet.ProviderPods.To.String()))
		Expect(table).To(HaveKeyWithValue("pods/us", usNet.ProviderPods.To.String()))
		out, err := ferryctl(ctx, "status", "--kubeconfig", consumer.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("this cluster: pod CIDR 10.244.0.0/16, service CIDR 10.96.0.0/16"))
		Expect(out).To(MatchRegexp(`eu\s+10\.244\.0\.0/16\s+` + regexp.QuoteMeta(euNet.ProviderPods.To.String()) + `\s+` + regexp.QuoteMeta(euNet.ConsumerPods.To.String())))
		Expect(out).To(MatchRegexp(`us\s+10\.244\.0\.0/16\s+` + regexp.QuoteMeta(usNet.ProviderPods.To.String())))
	})

	It("joins three clusters with one pod CIDR: the consumer reaches each provider's pod, and only through its tunnel", func(ctx context.Context) {
		needLab()
		Expect(web).NotTo(BeNil(), "needs the consumer pod of the first data path spec")
		tunnelUp(ctx, "eu")
		tunnelUp(ctx, "us")
		ns := framework.CreateNamespace(ctx, consumer, "three")
		twin := framework.OffloadNamespace(ctx, consumer, ns, "us")
		api := runPod(ctx, ns, "api", peering.VirtualNodeName("us"), nil)
		real := remotePodIP(ctx, us, twin, "api")
		apiNS, err := labs["us"].AddPod(0, "api", real)
		Expect(err).NotTo(HaveOccurred())
		// Another port than eu's pod: a packet delivered to the wrong
		// cluster, whose pods share these addresses, is refused.
		_, err = apiNS.ServeEcho(8081)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error { return echo(ctx, web, api.Status.PodIP, 8081) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(echo(ctx, web, euAddr, 8080)).To(Succeed(), "eu's pod, still reached through its own tunnel")
		usAddr = api.Status.PodIP
		GinkgoWriter.Printf("eu's pod at %s and us's pod at %s here; in their clusters both are 10.244.x (us: %s)\n", euAddr, usAddr, real)
	})

	It("releases a provider's ranges on both sides when it is unpeered", func(ctx context.Context) {
		Expect(allocations(ctx, us)).To(HaveKey("pods/consumer"))
		out, err := ferryctl(ctx, "unpeer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", us.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			g.Expect(allocations(ctx, consumer)).NotTo(HaveKey("pods/us"))
			g.Expect(allocations(ctx, consumer)).NotTo(HaveKey("apiserver/us"))
			g.Expect(allocations(ctx, consumer)).To(HaveKey("pods/eu"), "the other provider keeps its range")
			err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "us"}, &ferryv1alpha1.NetworkConfig{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err).To(HaveOccurred(), "the provider's NetworkConfig is gone")
			g.Expect(allocations(ctx, us)).NotTo(HaveKey("pods/consumer"))
			g.Expect(allocations(ctx, us)).NotTo(HaveKey("apiserver/consumer"))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		if lab == nil || usAddr == "" {
			return
		}
		By("leaving no interface, rule or route of ferry's in us's gateway and nodes")
		Eventually(func() string { return inventory(lab, labs["us"], gwPods["us"]) }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Equal(usBefore))
		By("no longer reaching us's pod")
		Expect(echo(ctx, web, usAddr, 8081)).NotTo(Succeed())
		Expect(echo(ctx, web, euAddr, 8080)).To(Succeed(), "eu is still peered")
	})
	It("resumes a flow through a gateway killed with SIGKILL and restarted", func(ctx context.Context) {
		needLab()
		Expect(web).NotTo(BeNil(), "needs the consumer pod of the first data path spec")
		tunnelUp(ctx, "eu")
		flow := startFlow(ctx, web, euAddr, 8080)
		DeferCleanup(flow.stop)
		Eventually(flow.count).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeNumerically(">", 5))
		gateways["eu"].Kill()
		before := flow.count()
		time.Sleep(2 * time.Second)
		gateways["eu"].Start()
		Eventually(flow.count).WithContext(ctx).WithTimeout(60*time.Second).Should(BeNumerically(">", before+5), "the flow did not resume; its error: %v", flow.err())
		Expect(flow.err()).NotTo(HaveOccurred(), "the same TCP connection goes on")
		GinkgoWriter.Printf("longest pause of the flow: %s\n", flow.maxGap())
	})

	It("shows an offloaded pod not Ready within the node-monitor grace period while its provider's API server is down, with or without the tunnel, and Ready again once both are back", Label("chaos"), func(ctx context.Context) {
		needLab()
		Expect(web).NotTo(BeNil(), "needs the consumer pod of the first data path spec")
		tunnelUp(ctx, "eu")
		ns := framework.CreateNamespace(ctx, consumer, "unreachable")
		twin := framework.OffloadNamespace(ctx, consumer, ns, "eu")
		// kwok once gave this pod the address its lab already gave the first
		// data path spec's pod (seen in a full make test run, cause not
		// attributed): a pod whose address the lab holds is replaced by
		// another, so the echo answering is this pod's.
		var pod *corev1.Pod
		var served *netlab.Pod
		for attempt := 0; served == nil; attempt++ {
			name := fmt.Sprintf("served-%d", attempt)
			pod = runPod(ctx, ns, name, peering.VirtualNodeName("eu"), nil)
			real := remotePodIP(ctx, eu, twin, name)
			p, err := labs["eu"].AddPod(0, name, real)
			if err != nil && strings.Contains(err.Error(), "exists") && attempt < 3 {
				GinkgoWriter.Printf("pod %s got %s, which the lab holds already: replacing it\n", name, real)
				Expect(consumer.Client.Delete(ctx, pod)).To(Succeed())
				continue
			}
			Expect(err).NotTo(HaveOccurred())
			served = p
		}
		_, err := served.ServeEcho(8080)
		Expect(err).NotTo(HaveOccurred())
		addr := pod.Status.PodIP
		Eventually(func() error { return echo(ctx, web, addr, 8080) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// kube-controller-manager's --node-monitor-grace-period (the test
		// bed keeps the default).
		const nodeMonitorGracePeriod = 50 * time.Second
		ready := func(want corev1.ConditionStatus) func(g Gomega) {
			return func(g Gomega) {
				var p corev1.Pod
				g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				c := podCondition(&p, corev1.PodReady)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(want))
				if want == corev1.ConditionFalse {
					g.Expect(c.Reason).To(Equal(offloading.ReasonProviderUnreachable))
				}
			}
		}
		Eventually(ready(corev1.ConditionTrue)).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("eu's API server stops, its tunnel still carries traffic: not Ready, still reachable at its address")
		down := time.Now()
		eu.StopAPIServer()
		Eventually(ready(corev1.ConditionFalse)).WithContext(ctx).WithTimeout(nodeMonitorGracePeriod - time.Since(down)).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("pod not Ready after eu's API server began to stop, tunnel up", time.Since(down).Round(10*time.Millisecond).String())
		Expect(echo(ctx, web, addr, 8080)).To(Succeed(), "the pod serves through the tunnel meanwhile")
		Expect(eu.StartAPIServer(ctx)).To(Succeed())
		back := time.Now()
		Eventually(ready(corev1.ConditionTrue)).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("pod Ready again after eu's API server returned", time.Since(back).Round(10*time.Millisecond).String())

		By("eu's gateway and API server both stop: wholly unreachable, not Ready the same way")
		down = time.Now()
		gateways["eu"].Kill()
		eu.StopAPIServer()
		Eventually(ready(corev1.ConditionFalse)).WithContext(ctx).WithTimeout(nodeMonitorGracePeriod - time.Since(down)).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("pod not Ready after eu's gateway was killed and its API server began to stop", time.Since(down).Round(10*time.Millisecond).String())
		Expect(echo(ctx, web, addr, 8080)).NotTo(Succeed(), "the tunnel is down")
		Expect(eu.StartAPIServer(ctx)).To(Succeed())
		gateways["eu"].Start()
		back = time.Now()
		Eventually(ready(corev1.ConditionTrue)).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("pod Ready again after eu's gateway and API server returned", time.Since(back).Round(10*time.Millisecond).String())
		tunnelUp(ctx, "eu")
		Eventually(func() error { return echo(ctx, web, addr, 8080) }).WithContext(ctx).WithTimeout(60*time.Second).
			Should(Succeed(), "eu's gateway log:\n%s", tail(gateways["eu"].Log(), 40))
	})

	It("rotates the consumer gateway's key while a flow goes on", func(ctx context.Context) {
		needLab()
		Expect(web).NotTo(BeNil(), "needs the consumer pod of the first data path spec")
		tunnelUp(ctx, "eu")
		var local ferryv1alpha1.NetworkConfig
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "consumer"}, &local)).To(Succeed())
		Expect(local.Spec.Gateway).NotTo(BeNil())
		oldKey := local.Spec.Gateway.PublicKey
		flow := startFlow(ctx, web, euAddr, 8080)
		DeferCleanup(flow.stop)
		Eventually(flow.count).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeNumerically(">", 5))
		var secret corev1.Secret
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-gateway-key"}, &secret)).To(Succeed())
		metav1.SetMetaDataAnnotation(&secret.ObjectMeta, "ferry.io/rotate-key", "now")
		Expect(consumer.Client.Update(ctx, &secret)).To(Succeed())
		By("announcing the next key, then switching both sides at the announced time")
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(&local), &local)).To(Succeed())
			g.Expect(local.Spec.Gateway.PublicKey).NotTo(Equal(oldKey))
			g.Expect(local.Spec.Gateway.NextPublicKey).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		before := flow.count()
		Eventually(flow.count).WithContext(ctx).WithTimeout(30*time.Second).Should(BeNumerically(">", before+20), func() string {
			return fmt.Sprintf("flow error: %v\nconsumer gateway:\n%s\neu gateway:\n%s", flow.err(), tail(gateways["consumer"].Log(), 80), tail(gateways["eu"].Log(), 80))
		})
		Expect(flow.err()).NotTo(HaveOccurred())
		tunnelUp(ctx, "eu")
		GinkgoWriter.Printf("longest pause of the flow during the rotation: %s\n", flow.maxGap())
	})

	// Last: the managers it restarts stop with it.
	It("keeps every allocation when every controller restarts", func(ctx context.Context) {
		before := map[string]map[string]string{}
		for _, c := range []*testbed.Cluster{consumer, eu, us} {
			before[c.Name] = allocations(ctx, c)
			ferries[c.Name].Stop(ctx)
		}
		euBefore := framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")
		var local ferryv1alpha1.NetworkConfig
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "consumer"}, &local)).To(Succeed())
		// Gone while nothing runs: the restarted IPAM must make it again,
		// which shows it ran, with the same external CIDR.
		Expect(consumer.Client.Delete(ctx, &local)).To(Succeed())
		for _, c := range []*testbed.Cluster{consumer, eu, us} {
			start(ctx, c)
		}
		Eventually(func(g Gomega) {
			var again ferryv1alpha1.NetworkConfig
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "consumer"}, &again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(local.UID))
			g.Expect(again.Spec).To(Equal(local.Spec))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		// Give the restarted managers time to act on everything once.
		Consistently(func(g Gomega) {
			for _, c := range []*testbed.Cluster{consumer, eu, us} {
				var cm corev1.ConfigMap
				g.Expect(c.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: fabricctrl.IPAMConfigMap}, &cm)).To(Succeed())
				var table map[string]string
				g.Expect(json.Unmarshal([]byte(cm.Data["allocations"]), &table)).To(Succeed())
				g.Expect(table).To(Equal(before[c.Name]), "allocations of %s", c.Name)
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		Expect(framework.WaitPeerNetwork(ctx, consumer, "consumer", "eu")).To(Equal(euBefore))
	})
})
