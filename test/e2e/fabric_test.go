package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"regexp"
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
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
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

		By("reporting NetworkReady false until the tunnel exists")
		Eventually(func(g Gomega) {
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "eu"}, &fc)).To(Succeed())
			c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterNetworkReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal("TunnelNotBuilt"))
			g.Expect(c.Message).To(ContainSubstring(euPods.String()))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

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
	})
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
