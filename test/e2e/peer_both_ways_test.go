package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

var _ = Describe("Peering both ways with ferryctl", Label("peering", "peer-both-ways"), Ordered, func() {
	var east, west *testbed.Cluster
	var eastToWest, westToEast []string

	// expectRole checks the role of c's ForeignCluster for peer.
	expectRole := func(ctx context.Context, c *testbed.Cluster, peer string, role ferryv1alpha1.PeeringRole) {
		GinkgoHelper()
		var fc ferryv1alpha1.ForeignCluster
		Expect(c.Client.Get(ctx, client.ObjectKey{Name: peer}, &fc)).To(Succeed())
		Expect(fc.Spec.Role).To(Equal(role), "ForeignCluster %s on %s", peer, c.Name)
	}
	expectNodeReady := func(ctx context.Context, c *testbed.Cluster, provider ferryv1alpha1.ClusterID) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var node corev1.Node
			g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: peering.VirtualNodeName(provider)}, &node)).To(Succeed())
			g.Expect(nodeCondition(&node, corev1.NodeReady)).To(HaveField("Status", corev1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "virtual node of %s on %s", provider, c.Name)
	}
	// runPod runs a pod in an offloaded namespace of consumer and waits
	// until it is Running locally, bound to provider's virtual node, with
	// its copy Running in the twin namespace; it returns the copy.
	runPod := func(ctx context.Context, consumer, provider *testbed.Cluster, providerID ferryv1alpha1.ClusterID, ns, twin, name string) *corev1.Pod {
		GinkgoHelper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		var remote corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(Equal(peering.VirtualNodeName(providerID)))
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, &remote)).To(Succeed())
			g.Expect(remote.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(Succeed(), "pod %s of %s offloaded to %s", name, consumer.Name, providerID)
		return &remote
	}
	var eastNS, westNS, westTwin string
	var toEast *corev1.Pod

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "east", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "east", Count: 1, CPU: "8", Memory: "32Gi"}}},
			testbed.Options{Name: "west", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "west", Count: 1, CPU: "8", Memory: "32Gi"}}},
		)
		east, west = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
		framework.StartFerry(ctx, east, "east", framework.FerryOptions{Health: health})
		framework.StartFerry(ctx, west, "west", framework.FerryOptions{Health: health})
		// Namespaces of the whole container: a pod offloaded both ways
		// lives through the unpeering of the other direction.
		eastNS = framework.CreateNamespace(ctx, east, "to-west")
		westNS = framework.CreateNamespace(ctx, west, "to-east")
		eastToWest = []string{"--consumer-kubeconfig", east.KubeconfigPath, "--provider-kubeconfig", west.KubeconfigPath, "--timeout", "90s"}
		westToEast = []string{"--consumer-kubeconfig", west.KubeconfigPath, "--provider-kubeconfig", east.KubeconfigPath, "--timeout", "90s"}
	})

	It("peers east to west, then west to east: both ForeignClusters ConsumerAndProvider, both virtual nodes Ready", func(ctx context.Context) {
		out, err := ferryctl(ctx, append([]string{"peer"}, eastToWest...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		expectRole(ctx, east, "west", ferryv1alpha1.RoleProvider)
		expectRole(ctx, west, "east", ferryv1alpha1.RoleConsumer)

		start := time.Now()
		out, err = ferryctl(ctx, append([]string{"peer"}, westToEast...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("peering the reverse direction", time.Since(start).Round(10*time.Millisecond).String())
		expectRole(ctx, east, "west", ferryv1alpha1.RoleConsumerAndProvider)
		expectRole(ctx, west, "east", ferryv1alpha1.RoleConsumerAndProvider)
		expectNodeReady(ctx, east, "west")
		expectNodeReady(ctx, west, "east")

		By("settling: no controller rewrites the ForeignClusters at rest")
		versions := func() string {
			var a, b ferryv1alpha1.ForeignCluster
			Expect(east.Client.Get(ctx, client.ObjectKey{Name: "west"}, &a)).To(Succeed())
			Expect(west.Client.Get(ctx, client.ObjectKey{Name: "east"}, &b)).To(Succeed())
			return a.ResourceVersion + "/" + b.ResourceVersion
		}
		Eventually(func() bool {
			before := versions()
			time.Sleep(3 * time.Second) // six health-check periods
			return versions() == before
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "the ForeignClusters are rewritten at rest")

		By("refusing a third peering either way")
		out, err = ferryctl(ctx, append([]string{"peer"}, eastToWest...)...)
		Expect(err).To(MatchError(ContainSubstring("already peered")), out)
		out, err = ferryctl(ctx, append([]string{"peer"}, westToEast...)...)
		Expect(err).To(MatchError(ContainSubstring("already peered")), out)
	})

	It("offloads a pod each way and shows both directions in status", func(ctx context.Context) {
		eastTwin := framework.OffloadNamespace(ctx, east, eastNS, "west")
		runPod(ctx, east, west, "west", eastNS, eastTwin, "to-west")
		westTwin = framework.OffloadNamespace(ctx, west, westNS, "east")
		toEast = runPod(ctx, west, east, "east", westNS, westTwin, "to-east")

		By("status -o json: the objects of both directions")
		out, err := ferryctl(ctx, "status", "--kubeconfig", east.KubeconfigPath, "-o", "json")
		Expect(err).NotTo(HaveOccurred(), out)
		var list struct {
			Items []struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     struct {
					ClusterID         string `json:"clusterID"`
					Role              string `json:"role"`
					ConsumerClusterID string `json:"consumerClusterID"`
				} `json:"spec"`
			} `json:"items"`
		}
		Expect(json.Unmarshal([]byte(out), &list)).To(Succeed(), out)
		kinds := map[string]string{}
		for _, it := range list.Items {
			kinds[it.Kind+"/"+it.Spec.ClusterID+it.Spec.ConsumerClusterID] = it.Spec.Role
		}
		Expect(kinds).To(HaveKeyWithValue("ForeignCluster/west", "ConsumerAndProvider"))
		Expect(kinds).To(HaveKey("VirtualNode/west"), "OUT: the grant east uses in west")
		Expect(kinds).To(HaveKey("ResourceSlice/west"), "IN: the grant east gives west")

		By("status -o wide: one row for west, OUT and IN each in their own columns")
		Eventually(func(g Gomega) {
			out, err := ferryctl(ctx, "status", "--kubeconfig", east.KubeconfigPath, "-o", "wide")
			g.Expect(err).NotTo(HaveOccurred(), out)
			lines := strings.Split(out, "\n")
			g.Expect(lines[0]).To(MatchRegexp(`^PEER\s+ROLE\s+HEALTH\s+VIRTUAL NODE\s+OUT CPU\s+OUT MEMORY\s+OUT PODS\s+IN CPU\s+IN MEMORY\s+IN PODS\s+NETWORK\s+AGE\s+HEALTH SINCE`), out)
			// Fields: peer, role, health, node name and readiness, then
			// the OUT and the IN cells.
			var row []string
			for _, l := range lines[1:] {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "west" {
					row = f
					break // the peers table's, not the network table's
				}
			}
			g.Expect(row).NotTo(BeEmpty(), out)
			g.Expect(row[1]).To(Equal("both"), out)
			g.Expect(row[2]).To(Equal("Ready"), out)
			g.Expect(row[3:5]).To(Equal([]string{"ferry-west", "Ready"}), out)
			g.Expect(row[7]).To(HavePrefix("1/"), "OUT PODS: the pod east offloaded to west\n%s", out)
			g.Expect(row[10]).To(HavePrefix("1/"), "IN PODS: the ShadowPod west offloaded to east\n%s", out)
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("unpeers east to west and keeps west to east working", func(ctx context.Context) {
		start := time.Now()
		out, err := ferryctl(ctx, append([]string{"unpeer"}, eastToWest...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("unpeering one direction of two", time.Since(start).Round(10*time.Millisecond).String())
		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("keeps offloading"))
		expectRole(ctx, east, "west", ferryv1alpha1.RoleConsumer)
		expectRole(ctx, west, "east", ferryv1alpha1.RoleProvider)
		err = east.Client.Get(ctx, client.ObjectKey{Name: peering.VirtualNodeName("west")}, &corev1.Node{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "east's virtual node for west is left: %v", err)
		var fc ferryv1alpha1.ForeignCluster
		Expect(east.Client.Get(ctx, client.ObjectKey{Name: "west"}, &fc)).To(Succeed())
		Expect(fc.Spec.CredentialsSecretRef).To(BeNil())
		Expect(fc.Spec.APIServerURL).To(BeEmpty())
		err = east.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("west")}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "east's credential for west is left: %v", err)
		Eventually(func() bool {
			return apierrors.IsNotFound(west.Client.Get(ctx, client.ObjectKey{Name: peering.TenantNamespace("east")}, &corev1.Namespace{}))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "east's tenant is left on west")

		By("west still offloading to east: its virtual node Ready, a new pod runs there")
		expectNodeReady(ctx, west, "east")
		Consistently(func(g Gomega) {
			var node corev1.Node
			g.Expect(west.Client.Get(ctx, client.ObjectKey{Name: peering.VirtualNodeName("east")}, &node)).To(Succeed())
			g.Expect(nodeCondition(&node, corev1.NodeReady)).To(HaveField("Status", corev1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		var still corev1.Pod
		Expect(east.Client.Get(ctx, client.ObjectKeyFromObject(toEast), &still)).To(Succeed())
		Expect(still.UID).To(Equal(toEast.UID), "the pod west offloaded to east was replaced")
		Expect(still.Status.Phase).To(Equal(corev1.PodRunning))
		runPod(ctx, west, east, "east", westNS, westTwin, "again")
		Eventually(func(g Gomega) {
			out, err := ferryctl(ctx, "status", "--kubeconfig", east.KubeconfigPath)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(MatchRegexp(`(?m)^west\s+consumer\s+-\s+-\s+-\s+-\s+-\s+\S+/\S+\s+\S+/\S+\s+2/`), "west, a consumer of east only, with its two pods IN")
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		By("unpeering west to east too, which leaves nothing")
		start = time.Now()
		out, err = ferryctl(ctx, append([]string{"unpeer"}, westToEast...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		AddReportEntry("unpeering the last direction", time.Since(start).Round(10*time.Millisecond).String())
		for _, c := range []*testbed.Cluster{east, west} {
			var fcs ferryv1alpha1.ForeignClusterList
			Expect(c.Client.List(ctx, &fcs)).To(Succeed())
			Expect(fcs.Items).To(BeEmpty(), "ForeignClusters left on %s", c.Name)
		}
	})
})
