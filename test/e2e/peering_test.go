package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/realbed"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

// ferryctl runs the real command line in this process with args and
// returns its output.
var ferryctl = realbed.Ferryctl

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

var _ = Describe("Peering and the virtual node", Label("peering", "virtualnode"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	var consumerFerry *framework.Ferry
	var pair []string
	virtualNode := peering.VirtualNodeName("provider")
	euWest := map[string]string{corev1.LabelTopologyRegion: "eu-west"}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 3, CPU: "8", Memory: "32Gi", Labels: euWest}}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
		consumerFerry = framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{Health: health})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{Health: health})
		pair = []string{"--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s"}

		By("requesting 6 CPU on the provider")
		ns := framework.CreateNamespace(ctx, provider, "busy")
		for i := range 3 {
			Expect(provider.Client.Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("busy-%d", i), Namespace: ns},
				Spec: corev1.PodSpec{NodeName: fmt.Sprintf("worker-%d", i), Containers: []corev1.Container{{Name: "c", Image: "pause",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}},
			})).To(Succeed())
		}
	})

	It("peers with ferryctl into a Ready virtual node holding 90% of the provider's free resources", func(ctx context.Context) {
		start := time.Now()
		out, err := ferryctl(ctx, append([]string{"peer"}, pair...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("peering wall time", time.Since(start).Round(10*time.Millisecond).String())
		Expect(out).To(ContainSubstring("[6/6]"))

		var node corev1.Node
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
		cpu := node.Status.Capacity[corev1.ResourceCPU]
		Expect(cpu.String()).To(Equal("16200m"), "90%% of 3x8 CPU minus 6 requested")
		alloc := node.Status.Allocatable[corev1.ResourceCPU]
		Expect(alloc.String()).To(Equal("16200m"))
		Expect(node.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelNodeType, ferryv1alpha1.NodeTypeVirtual))
		Expect(node.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, "provider"))
		Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "eu-west"), "the region all provider nodes share")
		Expect(node.Spec.Taints).To(ContainElement(And(HaveField("Key", ferryv1alpha1.TaintVirtualNode), HaveField("Effect", corev1.TaintEffectNoExecute))))
		Expect(nodeCondition(&node, corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		Expect(consumer.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, virtualNode, metav1.GetOptions{})).NotTo(BeNil())

		out, err = consumer.Kubectl(ctx, "get", "foreignclusters")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`provider\s+provider\s+Provider\s+True\s+True\s+True\s+True`), out)
		out, err = provider.Kubectl(ctx, "get", "foreignclusters")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`consumer\s+consumer\s+Consumer\s+\s+True\s+True\s+`), "the provider's side of the story:\n%s", out)
		out, err = ferryctl(ctx, "status", "--kubeconfig", consumer.KubeconfigPath)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^provider\s+provider\s+Ready\s+ferry-provider Ready\s+0/16200m\s`), "OUT CPU: used/granted")
	})

	It("follows the provider: a new node, new requests and new StorageClasses there change the virtual node", func(ctx context.Context) {
		cpuOf := func(g Gomega) string {
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			q := node.Status.Capacity[corev1.ResourceCPU]
			return q.String()
		}
		Expect(provider.AddNodes(ctx, testbed.NodePool{Name: "extra", CPU: "8", Memory: "32Gi", Labels: euWest})).To(Succeed())
		Eventually(cpuOf).WithContext(ctx).WithTimeout(45*time.Second).WithPolling(250*time.Millisecond).Should(Equal("23400m"), "90% of (32 - 6)")

		ns := framework.CreateNamespace(ctx, provider, "more")
		Expect(provider.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
			Spec: corev1.PodSpec{NodeName: "extra-0", Containers: []corev1.Container{{Name: "c", Image: "pause",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}}}},
		})).To(Succeed())
		Eventually(cpuOf).WithContext(ctx).WithTimeout(45*time.Second).WithPolling(250*time.Millisecond).Should(Equal("19800m"), "90% of (32 - 10)")

		Expect(provider.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns}}, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(cpuOf).WithContext(ctx).WithTimeout(45*time.Second).WithPolling(250*time.Millisecond).Should(Equal("23400m"), "the freed CPU is shared again")

		By("offering the provider's StorageClasses but ferry's own, under the consumer's storageClassMap too")
		for _, sc := range []*storagev1.StorageClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "ssd", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/none"},
			{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.StorageClassVirtual}, Provisioner: ferryv1alpha1.ProvisionerVirtual},
		} {
			Expect(provider.Client.Create(ctx, sc)).To(Succeed())
		}
		var fc ferryv1alpha1.ForeignCluster
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
		patch := client.MergeFrom(fc.DeepCopy())
		fc.Spec.StorageClassMap = map[string]string{"fast": "ssd", "gold": "platinum"}
		Expect(consumer.Client.Patch(ctx, &fc, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			var slice ferryv1alpha1.ResourceSlice
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &slice)).To(Succeed())
			g.Expect(slice.Status.StorageClasses).To(Equal([]ferryv1alpha1.StorageClassOffer{{Name: "ssd", Default: true}}))
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			g.Expect(node.Annotations).To(HaveKeyWithValue(ferryv1alpha1.AnnotationStorageClasses,
				`[{"name":"","providerClass":"ssd"},{"name":"fast","providerClass":"ssd"},{"name":"ssd","providerClass":"ssd"}]`))
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
			granted := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterResourcesGranted)
			g.Expect(granted).NotTo(BeNil())
			g.Expect(granted.Message).To(ContainSubstring("spec.storageClassMap names classes the provider does not offer, ignored: gold=platinum"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the grant's classes reach the virtual node")
	})

	It("gives the consumer a credential that reaches its tenant namespace only", func(ctx context.Context) {
		var secret corev1.Secret
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("provider")}, &secret)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[ferryv1alpha1.KubeconfigSecretKey])
		Expect(err).NotTo(HaveOccurred())
		kube, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme})
		Expect(err).NotTo(HaveOccurred())
		tenant := peering.TenantNamespace("consumer")

		var slices ferryv1alpha1.ResourceSliceList
		Expect(c.List(ctx, &slices, client.InNamespace(tenant))).To(Succeed(), "its own tenant namespace")
		Expect(slices.Items).To(HaveLen(1))

		forbidden := map[string]error{}
		_, forbidden["secrets in its tenant"] = kube.CoreV1().Secrets(tenant).List(ctx, metav1.ListOptions{})
		_, forbidden["pods in default"] = kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		_, forbidden["secrets in kube-system"] = kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		_, forbidden["nodes"] = kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		_, forbidden["namespaces"] = kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		_, forbidden["create a namespace"] = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
		_, forbidden["foreign clusters"] = kube.Discovery().RESTClient().Get().AbsPath("/apis/ferry.io/v1alpha1/foreignclusters").DoRaw(ctx)
		_, forbidden["resource slices everywhere"] = kube.Discovery().RESTClient().Get().AbsPath("/apis/ferry.io/v1alpha1/resourceslices").DoRaw(ctx)
		_, forbidden["a token for another service account"] = kube.CoreV1().ServiceAccounts(tenant).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		for what, err := range forbidden {
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the consumer's credential reached %s: %v", what, err)
		}
	})

	It("marks the virtual node not Ready (Unknown) while the provider is down and Ready when it returns, without restarting the virtual kubelet", func(ctx context.Context) {
		readiness := func(g Gomega) string {
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			c := nodeCondition(&node, corev1.NodeReady)
			g.Expect(c).NotTo(BeNil())
			return string(c.Status) + "/" + c.Reason
		}
		starts := consumerFerry.VirtualKubeletStarts.Load()
		provider.StopAPIServer()
		Eventually(readiness).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal("Unknown/ProviderUnreachable"))
		Eventually(func(g Gomega) {
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(fc.Status.Conditions, ferryv1alpha1.ForeignClusterAPIServerReady)).To(BeTrue())
			g.Expect(meta.IsStatusConditionFalse(fc.Status.Conditions, ferryv1alpha1.ForeignClusterVirtualNodeReady)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the ForeignCluster tells of the outage")
		Expect(provider.StartAPIServer(ctx)).To(Succeed())
		Eventually(readiness).WithContext(ctx).WithTimeout(30 * time.Second).Should(HavePrefix("True/"))
		Expect(consumerFerry.VirtualKubeletStarts.Load()).To(Equal(starts), "the virtual kubelet was restarted")
	})

	It("renews the consumer's credential at two thirds of its lifetime and restarts the virtual kubelet with it", func(ctx context.Context) {
		key := client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("provider")}
		var before corev1.Secret
		Expect(consumer.Client.Get(ctx, key, &before)).To(Succeed())
		starts := consumerFerry.VirtualKubeletStarts.Load()

		renewStart := time.Now()
		consumerFerry.ClockOffset.Store(int64(21 * 24 * time.Hour)) // 30-day token, renewed after 20 days
		var after corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, key, &after)).To(Succeed())
			g.Expect(after.Data).NotTo(Equal(before.Data))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		consumerFerry.ClockOffset.Store(0)
		AddReportEntry("credential renewal", time.Since(renewStart).String())

		oldCfg, err := clientcmd.RESTConfigFromKubeConfig(before.Data[ferryv1alpha1.KubeconfigSecretKey])
		Expect(err).NotTo(HaveOccurred())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(after.Data[ferryv1alpha1.KubeconfigSecretKey])
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.BearerToken).NotTo(Equal(oldCfg.BearerToken), "the token was not replaced")
		Expect(cfg.Host).To(Equal(oldCfg.Host))
		c, err := client.New(cfg, client.Options{Scheme: testbed.Scheme})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.List(ctx, &ferryv1alpha1.ResourceSliceList{}, client.InNamespace(peering.TenantNamespace("consumer")))).To(Succeed(), "the renewed token works")
		Eventually(consumerFerry.VirtualKubeletStarts.Load).WithTimeout(30*time.Second).Should(BeNumerically(">", starts), "the virtual kubelet was not restarted with the new credential")
		Eventually(func(g Gomega) {
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			g.Expect(nodeCondition(&node, corev1.NodeReady).Status).To(Equal(corev1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("is quiet at rest, also after an outage and a renewal: nothing is rewritten while nothing changes", func(ctx context.Context) {
		versions := func() []string {
			var vn ferryv1alpha1.VirtualNode
			Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: virtualNode}, &vn)).To(Succeed())
			var fc, pfc ferryv1alpha1.ForeignCluster
			Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
			Expect(provider.Client.Get(ctx, client.ObjectKey{Name: "consumer"}, &pfc)).To(Succeed())
			var slice ferryv1alpha1.ResourceSlice
			Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &slice)).To(Succeed())
			return []string{"VirtualNode " + vn.ResourceVersion, "consumer ForeignCluster " + fc.ResourceVersion,
				"provider ForeignCluster " + pfc.ResourceVersion, "ResourceSlice " + slice.ResourceVersion}
		}
		Eventually(func() []string { // let the peering settle
			a := versions()
			time.Sleep(2 * time.Second)
			return append(a, versions()...)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Satisfy(func(v []string) bool {
			return fmt.Sprint(v[:4]) == fmt.Sprint(v[4:])
		}))
		before := versions()
		localBefore := consumerFerry.LocalRequests.Load()
		sliceBefore := resourceSliceRequests(ctx, provider)
		const window = 30 * time.Second // three health-check periods of the peer controller
		time.Sleep(window)
		Expect(versions()).To(Equal(before), "objects were rewritten at rest")
		perMinute := func(n int64) int64 { return n * int64(time.Minute) / int64(window) }
		AddReportEntry("API requests per minute at rest", fmt.Sprintf(
			"consumer: %d from ferry's controller manager and virtual kubelet; provider: %d on resourceslices (plus the /readyz probes, not counted by the API server)",
			perMinute(consumerFerry.LocalRequests.Load()-localBefore), perMinute(resourceSliceRequests(ctx, provider)-sliceBefore)))
	})

	It("refuses to peer twice and leaves the existing peering alone (the other way round is the peer-both-ways spec)", func(ctx context.Context) {
		out, err := ferryctl(ctx, append([]string{"peer"}, pair...)...)
		Expect(err).To(MatchError(ContainSubstring("already peered")), out)
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &ferryv1alpha1.ForeignCluster{})).To(Succeed())
		Expect(provider.Client.Get(ctx, client.ObjectKey{Name: "consumer"}, &ferryv1alpha1.ForeignCluster{})).To(Succeed())
	})

	It("unpeers, leaving both clusters clean and the credential revoked", func(ctx context.Context) {
		var secret corev1.Secret
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("provider")}, &secret)).To(Succeed())
		out, err := ferryctl(ctx, append([]string{"unpeer"}, pair...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		expectNoPeering(ctx, consumer, provider)

		By("presenting the old credential")
		cfg, err := clientcmd.RESTConfigFromKubeConfig(secret.Data[ferryv1alpha1.KubeconfigSecretKey])
		Expect(err).NotTo(HaveOccurred())
		kube, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		// The API server caches a successful token authentication for 10s.
		Eventually(func() error {
			_, err := kube.CoreV1().ServiceAccounts(peering.TenantNamespace("consumer")).List(ctx, metav1.ListOptions{})
			return err
		}).WithContext(ctx).WithTimeout(20*time.Second).Should(Satisfy(apierrors.IsUnauthorized), "the revoked token still authenticates")

		By("unpeering again, which fails naming both clusters, as kubectl delete of a missing object does")
		out, err = ferryctl(ctx, append([]string{"unpeer"}, pair...)...)
		Expect(err).To(MatchError(ContainSubstring(`"consumer" does not offload to "provider"`)), out)
		Expect(out).NotTo(ContainSubstring("Unpeered."))
		By("unpeering again with --ignore-not-found, which succeeds and says so")
		out, err = ferryctl(ctx, append([]string{"unpeer", "--ignore-not-found"}, pair...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Nothing to unpeer"))
	})

	DescribeTable("rejects bad input with a clear error and leaves no half-made peering",
		func(ctx context.Context, args func() []string, want string) {
			out, err := ferryctl(ctx, args()...)
			Expect(err).To(HaveOccurred(), out)
			Expect(err.Error()).To(ContainSubstring(want))
			expectNoPeering(ctx, consumer, provider)
		},
		Entry("a kubeconfig that does not exist", func() []string {
			return []string{"peer", "--consumer-kubeconfig", "/nonexistent/kubeconfig", "--provider-kubeconfig", provider.KubeconfigPath}
		}, "--consumer-kubeconfig"),
		Entry("an unreachable provider", func() []string {
			return []string{"peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", unreachableKubeconfig(), "--timeout", "10s"}
		}, "provider cluster (https://127.0.0.1:1)"),
		Entry("a cluster peered with itself", func() []string {
			return []string{"peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", consumer.KubeconfigPath}
		}, "with itself"),
		Entry("a resource the provider does not offer", func() []string {
			return append([]string{"peer", "--resources", "nvidia.com/gpu=1"}, pair...)
		}, "the provider offers no nvidia.com/gpu"),
		Entry("a malformed fixed request", func() []string {
			return append([]string{"peer", "--resources", "cpu=lots"}, pair...)
		}, `--resources: cpu="lots"`),
	)
})

// expectNoPeering checks that nothing of a peering is left on either side.
func expectNoPeering(ctx context.Context, consumer, provider *testbed.Cluster) {
	GinkgoHelper()
	var fcs ferryv1alpha1.ForeignClusterList
	Expect(consumer.Client.List(ctx, &fcs)).To(Succeed())
	Expect(fcs.Items).To(BeEmpty(), "ForeignClusters left on the consumer")
	Expect(provider.Client.List(ctx, &fcs)).To(Succeed())
	Expect(fcs.Items).To(BeEmpty(), "ForeignClusters left on the provider")
	var vns ferryv1alpha1.VirtualNodeList
	Expect(consumer.Client.List(ctx, &vns)).To(Succeed())
	Expect(vns.Items).To(BeEmpty(), "VirtualNodes left on the consumer")
	err := consumer.Client.Get(ctx, client.ObjectKey{Name: peering.VirtualNodeName("provider")}, &corev1.Node{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the virtual node is left: %v", err)
	var secrets corev1.SecretList
	Expect(consumer.Client.List(ctx, &secrets, client.InNamespace(ferryv1alpha1.SystemNamespace))).To(Succeed())
	Expect(secrets.Items).To(BeEmpty(), "credentials left on the consumer")
	Eventually(func() bool {
		err := provider.Client.Get(ctx, client.ObjectKey{Name: peering.TenantNamespace("consumer")}, &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "the tenant namespace is left on the provider")
}

// unreachableKubeconfig is a kubeconfig for an API server nobody serves.
func unreachableKubeconfig() string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "unreachable.kubeconfig")
	Expect(os.WriteFile(path, []byte(strings.TrimSpace(`
apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: x, user: {token: nothing}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
`)), 0o600)).To(Succeed())
	return path
}

// resourceSliceRequests sums the provider API server's request counter for
// ResourceSlices: at rest only the consumer's peer controller reads them.
func resourceSliceRequests(ctx context.Context, c *testbed.Cluster) int64 {
	GinkgoHelper()
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	var total int64
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="resourceslices"`) {
			var v float64
			_, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			Expect(err).NotTo(HaveOccurred(), line)
			total += int64(v)
		}
	}
	return total
}
