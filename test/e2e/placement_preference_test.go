package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The placement preference specs: a consumer whose two kwok nodes hold 8
// pods of 500m between them (4 each), one provider whose one 2-CPU node gives a
// virtual node of 1.8 CPU (90% shared: 3 such pods), ferry's pod webhook,
// ferry-scheduler in-process and the consumer's own kube-scheduler, ferry's
// controller managers and virtual kubelet in-process, and the consumer's
// kube-controller-manager, whose ReplicaSet controller scales down by
// pod-deletion-cost. Each spec counts a Deployment's pods per cluster.
var _ = Describe("Placement preference", Label("placement", "preference"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	virtualNode := peering.VirtualNodeName("provider")
	const podCPU = "500m"

	// counts returns how many Ready pods of app run in the consumer's
	// namespace on its real nodes and on the virtual node, and how many
	// pods of app the provider runs in the twin namespace; all of app's
	// local pods must be bound and Ready, and none terminating.
	counts := func(ctx context.Context, g Gomega, ns, twin, app string) (local, remote, inProvider int) {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is terminating", p.Name)
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s is not bound", p.Name)
			c := podCondition(&p, corev1.PodReady)
			g.Expect(c).NotTo(BeNil(), "pod %s", p.Name)
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue), "pod %s on %s is not Ready", p.Name, p.Spec.NodeName)
			if p.Spec.NodeName == virtualNode {
				remote++
			} else {
				local++
			}
		}
		var rpods corev1.PodList
		g.Expect(provider.Client.List(ctx, &rpods, client.InNamespace(twin), client.MatchingLabels{"app": app})).To(Succeed())
		for _, p := range rpods.Items {
			if p.DeletionTimestamp == nil {
				inProvider++
			}
		}
		return local, remote, inProvider
	}
	expectCounts := func(ctx context.Context, ns, twin, app string, local, remote int) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			l, r, p := counts(ctx, g, ns, twin, app)
			g.Expect([]int{l, r, p}).To(Equal([]int{local, remote, remote}), "local, on the virtual node, in the provider")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	}
	// settled waits until app's replicas pods are bound and Ready and
	// returns their counts per cluster.
	settled := func(ctx context.Context, ns, twin, app string, replicas int) (local, remote int) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var p int
			local, remote, p = counts(ctx, g, ns, twin, app)
			g.Expect(local + remote).To(Equal(replicas))
			g.Expect(p).To(Equal(remote))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		return local, remote
	}
	offload := func(ctx context.Context, prefix string, args ...string) (ns, twin string) {
		GinkgoHelper()
		ns = framework.CreateNamespace(ctx, consumer, prefix)
		out, err := ferryctl(ctx, append([]string{"offload", "namespace", ns, "--kubeconfig", consumer.KubeconfigPath, "--wait", "--timeout", "90s"}, args...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		var nso ferryv1alpha1.NamespaceOffloading
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		Expect(nso.Status.Clusters).To(HaveLen(1))
		return ns, nso.Status.Clusters[0].TwinNamespace
	}
	// run creates a Deployment of app in ns whose pods ask for nothing but
	// podCPU: the webhook does the rest. It is deleted, and its pods gone
	// from both clusters, when the spec ends, so the next finds the room.
	run := func(ctx context.Context, ns, twin, app string, replicas int32) {
		GinkgoHelper()
		d := deployment(ns, app, replicas, corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPU)}}}}})
		Expect(consumer.Client.Create(ctx, d)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, d))).To(Succeed())
			Eventually(func(g Gomega) {
				var local, remote corev1.PodList
				g.Expect(consumer.Client.List(ctx, &local, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
				g.Expect(provider.Client.List(ctx, &remote, client.InNamespace(twin), client.MatchingLabels{"app": app})).To(Succeed())
				g.Expect(local.Items).To(BeEmpty())
				g.Expect(remote.Items).To(BeEmpty())
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		})
	}
	scale := func(ctx context.Context, ns, app string, replicas int32) {
		GinkgoHelper()
		var d appsv1.Deployment
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app}, &d)).To(Succeed())
		d.Spec.Replicas = &replicas
		Expect(consumer.Client.Update(ctx, &d)).To(Succeed())
	}
	// expectCosts checks the pod-deletion-cost of app's pods: want on the
	// offloaded ones, none on the local ones.
	expectCosts := func(ctx context.Context, ns, app, want string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
			for _, p := range pods.Items {
				cost, ok := p.Annotations[placement.AnnotationPodDeletionCost]
				if p.Spec.NodeName == virtualNode {
					g.Expect(cost).To(Equal(want), "offloaded pod %s", p.Name)
				} else {
					g.Expect(ok).To(BeFalse(), "local pod %s has cost %q", p.Name, cost)
				}
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 2, CPU: "2", Memory: "8Gi"}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "2", Memory: "8Gi"}}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{})
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			var n corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &n)).To(Succeed())
			// 90% of the provider's 2 CPUs: room for 3 pods of 500m, not 4.
			g.Expect(n.Status.Allocatable.Cpu().Cmp(resource.MustParse("1500m"))).To(BeNumerically(">=", 0))
			g.Expect(n.Status.Allocatable.Cpu().Cmp(resource.MustParse("2"))).To(BeNumerically("<", 0))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	})

	It("LocalFirst under ferry-scheduler: fills the real nodes, bursts the rest to the provider, and scales the provider's pods down first", func(ctx context.Context) {
		ns, twin := offload(ctx, "local-first", "--placement-preference", "LocalFirst", "--scheduler-name", ferrySchedulerName)
		start := time.Now()
		// Without a preference the default scorers spread the pods (7
		// local, 3 remote): LocalFirst is ClusterPreference's doing.
		run(ctx, ns, twin, "burst", 10)
		expectCounts(ctx, ns, twin, "burst", 8, 2)
		AddReportEntry("LocalFirst, ferry-scheduler: 10 pods placed (8 local, 2 remote)", time.Since(start).Round(100*time.Millisecond).String())
		expectCosts(ctx, ns, "burst", "-100")

		By("scaling down to 8: the provider's pods go")
		scale(ctx, ns, "burst", 8)
		expectCounts(ctx, ns, twin, "burst", 8, 0)
	})

	It("RemoteFirst under ferry-scheduler: fills the provider, runs the rest locally, and scales the local pods down first", func(ctx context.Context) {
		ns, twin := offload(ctx, "remote-first", "--placement-preference", "RemoteFirst", "--scheduler-name", ferrySchedulerName)
		// Without a preference the default scorers spread the pods (at
		// most 2 remote).
		run(ctx, ns, twin, "steady", 5)
		expectCounts(ctx, ns, twin, "steady", 2, 3)
		expectCosts(ctx, ns, "steady", "100")

		By("scaling down to 3: the local pods go")
		scale(ctx, ns, "steady", 3)
		expectCounts(ctx, ns, twin, "steady", 0, 3)
	})

	It("LocalFirst under the default scheduler: a preferred node affinity, and the provider's pods still go first on scale-down", func(ctx context.Context) {
		ns, twin := offload(ctx, "local-first-default", "--placement-preference", "LocalFirst")
		run(ctx, ns, twin, "burst", 10)
		local, remote := settled(ctx, ns, twin, "burst", 10)
		AddReportEntry("LocalFirst, kube-scheduler (default profile): 10 pods placed", fmt.Sprintf("%d local, %d remote", local, remote))
		// What kube-scheduler guarantees: the real nodes' capacity (8 pods)
		// bounds the local count; the preferred term (NodeAffinity, weight
		// 2 × 100) only leans toward them.
		Expect(local).To(BeNumerically("<=", 8))
		var pods corev1.PodList
		Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "burst"})).To(Succeed())
		for _, p := range pods.Items {
			Expect(p.Spec.SchedulerName).To(Equal(corev1.DefaultSchedulerName))
			Expect(p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(ContainElement(*placement.PreferredNodeTerm(ferryv1alpha1.PlacementPreferenceLocalFirst)))
		}
		expectCosts(ctx, ns, "burst", "-100")

		By("scaling down by 2: two of the provider's pods go, whichever scheduler placed them")
		scale(ctx, ns, "burst", 8)
		expectCounts(ctx, ns, twin, "burst", local, remote-2)
	})
})
