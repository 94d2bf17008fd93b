package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/realbed"
	"github.com/ferry-io/ferry/test/testbed"
)

// The real-node bed the specs below share, in the order they are listed:
// set by the container's BeforeAll (test/realbed sets it up, as for `make
// bench-real`). Specs of one area live in their own file (real_*_test.go)
// as functions reading it, listed in the container.
var (
	realConsumer, realProvider *testbed.Cluster
)

// The cluster IDs of the real-node bed.
const realConsumerID, realProviderID = realbed.ConsumerID, realbed.ProviderID

var _ = Describe("ferry on real nodes, from its own images", Label("real"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	const consumerID, providerID = realConsumerID, realProviderID

	BeforeAll(func(ctx context.Context) {
		By("building ferry's images for linux/amd64 (hack/images) and exporting them for containerd")
		start := time.Now()
		dir, err := os.MkdirTemp("", "ferry-e2e-images-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		tarball, err := realbed.BuildFerryImages(ctx, framework.RepoRoot(), dir)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("ferry's images built and exported in %s\n", time.Since(start).Round(time.Second))
		start = time.Now()
		kubectl, err := realbed.BuildKubectlImage(ctx, dir)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("kubectl's image built in %s\n", time.Since(start).Round(time.Second))

		By("starting two clusters with a real node each, on one underlay")
		u, err := testbed.NewUnderlay(testbed.WithMTU(realUnderlayMTU))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(u.Close)
		start = time.Now()
		consumer, provider, err = realbed.StartClusters(ctx, u, tarball, kubectl)
		Expect(err).NotTo(HaveOccurred())
		clusters := []*testbed.Cluster{consumer, provider}
		framework.StopWithNode(clusters...)
		realConsumer, realProvider = consumer, provider
		GinkgoWriter.Printf("two clusters with real nodes up in %s\n", time.Since(start).Round(time.Second))
		DeferCleanup(func(ctx context.Context) {
			if CurrentSpecReport().Failed() {
				for _, c := range clusters {
					for _, n := range c.RealNodes {
						GinkgoWriter.Println(n.Logs(60))
					}
					dumpFerryPods(ctx, c)
				}
			}
		})
	})

	BeforeAll(realSnapshotBeforeInstall)

	It("installs with the Helm chart on the consumer and ferryctl install on the provider; every component runs Ready from its image", func(ctx context.Context) {
		By("helm install on the consumer")
		start := time.Now()
		Expect(realbed.HelmInstall(ctx, consumer, consumerID)).To(Succeed())
		GinkgoWriter.Printf("helm install --wait took %s\n", time.Since(start).Round(time.Second))

		By("ferryctl install on the provider")
		start = time.Now()
		Expect(realbed.FerryctlInstall(ctx, provider, providerID)).To(Succeed())
		GinkgoWriter.Printf("ferryctl install took %s\n", time.Since(start).Round(time.Second))

		for _, c := range []*testbed.Cluster{consumer, provider} {
			expectFerryPodsReady(ctx, c)
		}
	})

	It("peers them with ferryctl; the virtual node is Ready with the provider's real capacity", func(ctx context.Context) {
		Expect(realbed.Peer(ctx, consumer, provider)).To(Succeed())

		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes, client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(providerID)})).To(Succeed())
		Expect(nodes.Items).To(HaveLen(1))
		vn := nodes.Items[0]
		Expect(nodeCondition(&vn, corev1.NodeReady)).To(HaveField("Status", corev1.ConditionTrue))
		real, err := provider.Kube.CoreV1().Nodes().Get(ctx, provider.RealNodes[0].Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The provider's share of its real node: positive and no more than
		// the node offers.
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			got, have := vn.Status.Allocatable[r], real.Status.Allocatable[r]
			Expect(got.Sign()).To(BeNumerically(">", 0), "virtual node allocatable %s", r)
			Expect(got.Cmp(have)).To(BeNumerically("<=", 0), "virtual node allocatable %s %s exceeds the provider's real node's %s", r, got.String(), have.String())
		}
	})

	It("keeps the cluster's DaemonSets (ferry's route agent) off the virtual node", func(ctx context.Context) {
		pods, err := consumer.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		agents := 0
		for _, p := range pods.Items {
			for _, o := range p.OwnerReferences {
				if o.Kind == "DaemonSet" {
					agents++
					Expect(p.Spec.NodeName).To(Equal(consumer.RealNodes[0].Name), "DaemonSet pod %s", p.Name)
				}
			}
		}
		Expect(agents).To(BeNumerically(">=", 1), "no DaemonSet pod of ferry's on the consumer")
		Consistently(func(g Gomega) {
			ps, err := consumer.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + virtualNodeName(ctx, consumer, providerID)})
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range ps.Items {
				for _, o := range p.OwnerReferences {
					g.Expect(o.Kind).NotTo(Equal("DaemonSet"), "pod %s/%s of a DaemonSet on the virtual node", p.Namespace, p.Name)
				}
			}
		}).WithContext(ctx).WithTimeout(5 * time.Second).Should(Succeed())
	})

	It("runs an offloaded agnhost pod on the provider's real node; logs, exec and port-forward reach it from the consumer", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "real")
		twin := framework.OffloadNamespace(ctx, consumer, ns, providerID)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "netexec", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
					Args:           []string{"netexec", "--http-port=8080"},
					Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
					Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				}},
			},
		}
		start := time.Now()
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(pod.Status.ContainerStatuses).To(ConsistOf(HaveField("Ready", true)))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		GinkgoWriter.Printf("offloaded pod Ready in the consumer %s after create\n", time.Since(start).Round(100*time.Millisecond))
		Expect(pod.Spec.NodeName).To(Equal(virtualNodeName(ctx, consumer, providerID)))

		remote, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, pod.Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(remote.Spec.NodeName).To(Equal(provider.RealNodes[0].Name), "the remote pod runs on the provider's real node")
		Expect(remote.Status.ContainerStatuses).To(ConsistOf(HaveField("ContainerID", HavePrefix("containerd://"))))

		By("kubectl logs")
		logs, err := consumer.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred(), string(logs))
		Expect(string(logs)).To(ContainSubstring("Started HTTP server on port 8080"))

		By("kubectl exec")
		Eventually(func(g Gomega) {
			out, err := consumer.Exec(ctx, ns, pod.Name, "/agnhost", "etc-hosts")
			g.Expect(err).NotTo(HaveOccurred(), out)
			// The kubelet-managed /etc/hosts of the real container names it.
			g.Expect(out).To(ContainSubstring(remote.Status.PodIP))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("kubectl port-forward")
		local, stop := framework.PortForward(ctx, consumer, ns, pod.Name, 8080)
		defer stop()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/echo?msg=through-two-clusters", local))
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(string(body)).To(Equal("through-two-clusters"))
	})

	It("lets an offloaded pod use the consumer's API server with its own service account's token (kubectl in the pod, in-cluster configuration)", realAPIServerFromOffloadedPod)

	It("keeps a StatefulSet's data in the provider: each pod, deleted or scaled to 0 and back, returns there to its own claim and file", realStatefulDataSurvives)

	// ferry-volume-mover's image on a real node (real_mover_test.go).
	It("copies a claim's files with ferry-volume-mover's image: serve and fetch pods, verified by digest", Label("storage", "mover"), realMoverCopiesAClaim)

	// Expansion (real_expand_test.go).
	It("grows a claim held in the provider while its pod runs: both sides show the new size, no resize condition stays, the container keeps its volume", Label("storage", "expand"), realExpandProviderClaim)

	It("moves a StatefulSet's 256 MiB volume to the provider and back: refused while its pod runs, a killed copy starts again, the pod reads the same data in the other cluster", Label("storage", "move"), realMoveVolume)

	It("ran every ferry component without a restart", func(ctx context.Context) {
		var total int64
		for _, c := range []*testbed.Cluster{consumer, provider} {
			expectFerryPodsReady(ctx, c)
			rss, err := c.MemoryRSS()
			Expect(err).NotTo(HaveOccurred())
			var plane, nodes int64
			for _, b := range rss {
				plane += b
			}
			for _, n := range c.RealNodes {
				b, err := n.MemoryRSS()
				Expect(err).NotTo(HaveOccurred())
				nodes += b
			}
			GinkgoWriter.Printf("%s: control plane %d MiB, real node with ferry's pods %d MiB\n", c.Name, plane>>20, nodes>>20)
			total += plane + nodes
		}
		GinkgoWriter.Printf("the whole two-cluster real-node bed: %d MiB resident\n", total>>20)
	})

	// Cross-cluster pod traffic (real_network_test.go).
	It("serves a consumer pod through a ClusterIP Service whose pods are all offloaded", realServiceToOffloadedPods)
	It("serves an offloaded pod through a consumer Service reflected into its twin namespace", realOffloadedPodToHomeService)
	It("serves pods on both sides through a LocalAndRemote namespace's Service with endpoints in both clusters", realLocalAndRemoteService)
	It("carries 1400-byte and 64 KiB requests both ways over a 1400-byte underlay", realLargePackets)
	It("recovers cross-cluster traffic by itself when a gateway pod is deleted", realGatewayRestart)
	It("fails over to the passive gateway replica when the active one's container is killed; the peer follows", Label("ha"), realGatewayFailover)

	// ferryctl test network (real_testnet_test.go).
	It("ferryctl test network passes every path both ways, names the scaled-down gateway for the cross-cluster ones, and leaves nothing behind", Label("testnet"), realTestNetwork)

	// NetworkPolicy across clusters (real_netpol_test.go).
	It("enforces an offloaded namespace's NetworkPolicies on its offloaded pods, for consumer and provider pods alike", Label("netpol"), realNetworkPolicy)

	// Last: ferry is gone after it.
	It("unoffloads a namespace, leaving nothing of its twin in the provider; unpeers and uninstalls, leaving what README says", realUnoffloadAndUninstall)
})

// expectFerryPodsReady checks every pod in ferry-system is Running, Ready,
// from one of ferry's images, and never restarted.
func expectFerryPodsReady(ctx context.Context, c *testbed.Cluster) {
	GinkgoHelper()
	Expect(realbed.FerryPodsReady(ctx, c, 2*time.Minute)).To(Succeed())
}

func virtualNodeName(ctx context.Context, c *testbed.Cluster, provider ferryv1alpha1.ClusterID) string {
	GinkgoHelper()
	name, err := realbed.VirtualNodeName(ctx, c, provider)
	Expect(err).NotTo(HaveOccurred())
	return name
}

// dumpFerryPods prints the state and last log lines of ferry's pods, for a
// failed spec.
func dumpFerryPods(ctx context.Context, c *testbed.Cluster) {
	pods, err := c.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		GinkgoWriter.Printf("%s: list ferry pods: %v\n", c.Name, err)
		return
	}
	for _, p := range pods.Items {
		GinkgoWriter.Printf("==== %s: pod %s on %s: %s\n", c.Name, p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			GinkgoWriter.Printf("  %s ready=%t restarts=%d state=%+v last=%+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
			logs, _ := c.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: ptr.To[int64](30)}).DoRaw(ctx)
			GinkgoWriter.Println(string(logs))
		}
	}
}
