package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

// Node pools: a provider whose kwok nodes are labelled into two pools, big
// (2 nodes of 16 CPUs) and small (2 of 4), plus one node without the label,
// peered with --node-pool-label pool. The consumer runs kube-scheduler and
// ferry-scheduler (RemoteFit), ferry's controller managers run in-process
// with virtual kubelets as processes, and the provider runs ferry-webhook
// (ShadowPods are validated as in a cluster).
var _ = Describe("Node pools", Label("placement", "pools"), Ordered, func() {
	const poolKey = "pool"
	var consumer, provider *testbed.Cluster
	var ns, twin string
	bigNode, smallNode := peering.PoolVirtualNodeName("provider", poolKey, "big"), peering.PoolVirtualNodeName("provider", poolKey, "small")

	poolSpec := func(pool, cpu string) corev1.PodSpec {
		spec := remotePodSpec()
		spec.NodeSelector[poolKey] = pool
		spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
		return spec
	}
	// podsPerPool counts the provider pods of app in the twin namespace by
	// the pool of the provider node they run on ("" for the unlabelled one),
	// and the consumer pods of app by virtual node.
	podsPerPool := func(ctx context.Context, g Gomega, app string) (remote, local map[string]int) {
		var nodes corev1.NodeList
		g.Expect(provider.Client.List(ctx, &nodes)).To(Succeed())
		poolOf := map[string]string{}
		for _, n := range nodes.Items {
			poolOf[n.Name] = n.Labels[poolKey]
		}
		remote, local = map[string]int{}, map[string]int{}
		var pods corev1.PodList
		g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin), client.MatchingLabels{"app": app})).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "remote pod %s not scheduled", p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "remote pod %s", p.Name)
			remote[poolOf[p.Spec.NodeName]]++
		}
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				local[p.Spec.NodeName]++
			}
		}
		return remote, local
	}
	cpuOf := func(ctx context.Context, g Gomega, node string) resource.Quantity {
		var n corev1.Node
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
		return n.Status.Allocatable[corev1.ResourceCPU]
	}

	BeforeAll(func(ctx context.Context) {
		start := time.Now()
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{
				{Name: "big", Count: 2, CPU: "16", Memory: "64Gi", Pods: 110, Labels: map[string]string{poolKey: "big"}},
				{Name: "small", Count: 2, CPU: "4", Memory: "16Gi", Pods: 110, Labels: map[string]string{poolKey: "small"}},
				{Name: "plain", Count: 1, CPU: "64", Memory: "256Gi", Pods: 110},
			}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.StartWebhookProcess(ctx, framework.BuildBinary(ctx, "ferry-webhook"), provider)
		health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{Health: health, VirtualKubeletBinary: framework.BuildVirtualKubelet(ctx)})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{Health: health})
		framework.StartFerryScheduler(consumer)

		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath,
			"--node-pool-label", poolKey, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
		ns = framework.CreateNamespace(ctx, consumer, "pools")
		twin = framework.OffloadNamespace(ctx, consumer, ns, "provider")
		AddReportEntry("bed up and peered with pools", time.Since(start).Round(100*time.Millisecond).String())
	})

	It("refuses a pool label key that is not one, naming the flag", func(ctx context.Context) {
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath,
			"--node-pool-label", "not a key!")
		Expect(err).To(HaveOccurred(), out)
		Expect(err.Error()).To(ContainSubstring(`--node-pool-label "not a key!"`))
	})

	It("makes one virtual node per pool, sized from its own nodes and labelled with its pool", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			var vns ferryv1alpha1.VirtualNodeList
			g.Expect(consumer.Client.List(ctx, &vns, client.MatchingLabels{ferryv1alpha1.LabelClusterID: "provider"})).To(Succeed())
			names := []string{}
			for _, vn := range vns.Items {
				names = append(names, vn.Name)
			}
			g.Expect(names).To(ConsistOf(bigNode, smallNode), "one per pool; the unlabelled node makes none, and no whole-provider node")
			var slice ferryv1alpha1.ResourceSlice
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &slice)).To(Succeed())
			g.Expect(slice.Status.Pools).To(HaveLen(2))
			for _, c := range []struct {
				node, pool, cpu string
				grant           ferryv1alpha1.NodePoolGrant
			}{{bigNode, "big", "28800m", slice.Status.Pools[0]}, {smallNode, "small", "7200m", slice.Status.Pools[1]}} {
				var n corev1.Node
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: c.node}, &n)).To(Succeed())
				g.Expect(n.Labels).To(HaveKeyWithValue(poolKey, c.pool))
				g.Expect(n.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelClusterID, "provider"))
				cpu := n.Status.Allocatable[corev1.ResourceCPU]
				g.Expect(cpu.String()).To(Equal(c.cpu), "90%% of pool %s's CPUs", c.pool)
				g.Expect(c.grant.Value).To(Equal(c.pool))
				g.Expect(c.grant.Nodes).To(BeEquivalentTo(2))
				g.Expect(n.Annotations[ferryv1alpha1.AnnotationNodeShapes]).NotTo(BeEmpty())
			}
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
			g.Expect(fc.Status.Conditions).To(ContainElement(And(HaveField("Type", ferryv1alpha1.ForeignClusterVirtualNodeReady),
				HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("all 2 virtual nodes")))))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	It("runs a Deployment selecting a pool on that pool's provider nodes only, beside another pool's, and RemoteFit refuses a pod no node of its pool fits", func(ctx context.Context) {
		start := time.Now()
		Expect(consumer.Client.Create(ctx, deployment(ns, "on-big", 6, poolSpec("big", "1")))).To(Succeed())
		Expect(consumer.Client.Create(ctx, deployment(ns, "on-small", 2, poolSpec("small", "1")))).To(Succeed())
		expectCounts := func(g Gomega) {
			remote, local := podsPerPool(ctx, g, "on-big")
			g.Expect(remote).To(Equal(map[string]int{"big": 6}), "remote pods of on-big per provider pool")
			g.Expect(local).To(Equal(map[string]int{bigNode: 6}), "local pods of on-big per virtual node")
			remote, local = podsPerPool(ctx, g, "on-small")
			g.Expect(remote).To(Equal(map[string]int{"small": 2}), "remote pods of on-small per provider pool")
			g.Expect(local).To(Equal(map[string]int{smallNode: 2}), "local pods of on-small per virtual node")
		}
		Eventually(expectCounts).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		AddReportEntry("8 pods Running in their pools", time.Since(start).Round(100*time.Millisecond).String())
		By("each pool's virtual kubelet leaving the other's ShadowPods alone")
		Consistently(expectCounts).WithContext(ctx).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
		var sps ferryv1alpha1.ShadowPodList
		Expect(provider.Client.List(ctx, &sps, client.InNamespace(twin))).To(Succeed())
		Expect(sps.Items).To(HaveLen(8))
		for _, sp := range sps.Items {
			Expect(sp.Spec.Template.Spec.NodeSelector).To(HaveLen(1))
			Expect(sp.Labels).To(HaveKey(ferryv1alpha1.LabelOriginNode))
		}

		By("a 5-CPU pod on pool small, whose virtual node has 5.2 CPUs left but whose real nodes have 4 each")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "five-cpus"}, Spec: poolSpec("small", "5")}
		p.Spec.SchedulerName = ferrySchedulerName
		Expect(consumer.Client.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			var got corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			g.Expect(got.Spec.NodeName).To(BeEmpty())
			g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodScheduled), HaveField("Reason", corev1.PodReasonUnschedulable),
				HaveField("Message", ContainSubstring("no real node fits the pod: cpu 5 requested, at most 4 free on a node")))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())
		By("the same pod on pool big fits")
		big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "five-cpus-big", Labels: map[string]string{"app": "five-big"}}, Spec: poolSpec("big", "5")}
		big.Spec.SchedulerName = ferrySchedulerName
		Expect(consumer.Client.Create(ctx, big)).To(Succeed())
		Eventually(func(g Gomega) {
			remote, local := podsPerPool(ctx, g, "five-big")
			g.Expect(remote).To(Equal(map[string]int{"big": 1}))
			g.Expect(local).To(Equal(map[string]int{bigNode: 1}))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, p)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, big)).To(Succeed())
	})

	It("keeps a namespace whose clusterSelector names a pool on that pool's virtual node (ferry-scheduler's ClusterSelector)", func(ctx context.Context) {
		sel := framework.CreateNamespace(ctx, consumer, "pool-selected")
		Expect(consumer.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: sel},
			Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote,
				ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: poolKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"small"}}}}}}},
		})).To(Succeed())
		spec := remotePodSpec()
		spec.NodeSelector = nil // no pool, not even the virtual-node label: the namespace's policy decides
		spec.SchedulerName = ferrySchedulerName
		Eventually(func(g Gomega) {
			var nso ferryv1alpha1.NamespaceOffloading
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: sel, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
			g.Expect(nso.Status.Clusters).To(ConsistOf(And(HaveField("ClusterID", ferryv1alpha1.ClusterID("provider")), HaveField("Phase", ferryv1alpha1.OffloadingReady))))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(consumer.Client.Create(ctx, deployment(sel, "by-namespace", 4, spec))).To(Succeed())
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(sel), client.MatchingLabels{"app": "by-namespace"})).To(Succeed())
			g.Expect(pods.Items).To(HaveLen(4))
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).To(Equal(smallNode), "pod %s", p.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		var d appsv1.Deployment
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: sel, Name: "by-namespace"}, &d)).To(Succeed())
		Expect(consumer.Client.Delete(ctx, &d)).To(Succeed())
	})

	It("removes a pool's virtual node when its last node leaves the pool, draining its pods, and leaves the other pool's", func(ctx context.Context) {
		var before resource.Quantity
		Eventually(func(g Gomega) { before = cpuOf(ctx, g, bigNode) }).WithContext(ctx).Should(Succeed())
		start := time.Now()
		relabel := func(node, value string) {
			GinkgoHelper()
			var n corev1.Node
			Expect(provider.Client.Get(ctx, client.ObjectKey{Name: node}, &n)).To(Succeed())
			if value == "" {
				delete(n.Labels, poolKey)
			} else {
				n.Labels[poolKey] = value
			}
			Expect(provider.Client.Update(ctx, &n)).To(Succeed())
		}
		By("moving small-0 to pool big and taking the label off small-1")
		relabel("small-0", "big")
		relabel("small-1", "")
		Eventually(func(g Gomega) {
			err := consumer.Client.Get(ctx, client.ObjectKey{Name: smallNode}, &corev1.Node{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the small pool's Node is gone: %v", err)
			err = consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: smallNode}, &ferryv1alpha1.VirtualNode{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the small pool's VirtualNode is gone: %v", err)
			var pods corev1.PodList
			g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin), client.MatchingLabels{"app": "on-small"})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty(), "the drained pods' remote copies are gone")
			g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "on-small"})).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.Spec.NodeName).To(BeEmpty(), "on-small's new pod %s waits for a pool small", p.Name)
			}
			remote, local := podsPerPool(ctx, g, "on-big")
			g.Expect(remote).To(Equal(map[string]int{"big": 6}))
			g.Expect(local).To(Equal(map[string]int{bigNode: 6}))
			after := cpuOf(ctx, g, bigNode)
			g.Expect(after.Cmp(before)).To(BeNumerically(">", 0), "pool big grew by small-0: %s, was %s", after.String(), before.String())
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		AddReportEntry("pool small retired", time.Since(start).Round(100*time.Millisecond).String())
		var vns ferryv1alpha1.VirtualNodeList
		Expect(consumer.Client.List(ctx, &vns, client.MatchingLabels{ferryv1alpha1.LabelClusterID: "provider"})).To(Succeed())
		Expect(vns.Items).To(HaveLen(1))
		Expect(strings.HasPrefix(vns.Items[0].Name, "ferry-provider-big-")).To(BeTrue())
		var d appsv1.Deployment
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "on-small"}, &d)).To(Succeed())
	})
})
