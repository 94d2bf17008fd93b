package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The spread and RuntimeClass specs run on real clusters: a consumer with
// three kwok real nodes and two providers (eu: nodes in two zones of one
// region; us: nodes in one zone), each with ferry's controller manager, the
// consumer with ferry's webhook, ferry-scheduler beside kube-scheduler, and
// a virtual kubelet per provider. Topology labels travel as in production:
// provider nodes → the grant (ResourceSlice) → VirtualNode → Node; the
// consumer's real nodes are labelled by ferry-controller-manager.
var _ = Describe("Placement: spread across clusters, RuntimeClass ferry", Label("placement", "spread", "runtimeclass"), Ordered, func() {
	var consumer, eu, us *testbed.Cluster
	euNode, usNode := peering.VirtualNodeName("eu"), peering.VirtualNodeName("us")
	var start time.Time

	// offload offloads a new namespace to providers with strategy (and
	// schedulerName, "" for the default scheduler) and returns it with its
	// twin namespaces once Ready.
	offload := func(ctx context.Context, prefix string, strategy ferryv1alpha1.PodOffloadingStrategy, scheduler string, providers ...ferryv1alpha1.ClusterID) (string, map[ferryv1alpha1.ClusterID]string) {
		GinkgoHelper()
		ns := framework.CreateNamespace(ctx, consumer, prefix)
		return ns, framework.OffloadNamespaceTo(ctx, consumer, ns, ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy, SchedulerName: scheduler}, providers...)
	}
	nodeLabels := func(ctx context.Context, g Gomega, c *testbed.Cluster, name string) map[string]string {
		var n corev1.Node
		g.Expect(c.Client.Get(ctx, client.ObjectKey{Name: name}, &n)).To(Succeed())
		return n.Labels
	}
	// perCluster counts the Running pods of ns matching sel by the
	// topology.ferry.io/cluster label of their node.
	perCluster := func(ctx context.Context, g Gomega, ns string, sel map[string]string) map[string]int {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
		out := map[string]int{}
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s not scheduled: %v", p.Name, p.Status.Conditions)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s on %s", p.Name, p.Spec.NodeName)
			out[nodeLabels(ctx, g, consumer, p.Spec.NodeName)[ferryv1alpha1.LabelTopologyCluster]]++
		}
		return out
	}
	remoteRunning := func(ctx context.Context, g Gomega, provider *testbed.Cluster, twin string, sel map[string]string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin), client.MatchingLabels(sel))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "remote pod %s", p.Name)
		}
		return pods.Items
	}
	// spread is a Deployment of replicas pods spread over clusters: the
	// constraint docs/usage/placement.md "Spread across clusters" documents.
	spread := func(ns, name string, replicas int32) *appsv1.Deployment {
		d := deployment(ns, name, replicas, corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}})
		honor := corev1.NodeInclusionPolicyHonor
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: ferryv1alpha1.LabelTopologyCluster, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, NodeTaintsPolicy: &honor,
		}}
		return d
	}

	BeforeAll(func(ctx context.Context) {
		start = time.Now()
		zone := func(region, zone string) map[string]string {
			return map[string]string{corev1.LabelTopologyRegion: region, corev1.LabelTopologyZone: zone}
		}
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "local", Count: 3}}},
			testbed.Options{Name: "eu", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "eu-a", CPU: "16", Memory: "64Gi", Labels: zone("eu-west", "eu-west-1a")},
					{Name: "eu-b", CPU: "16", Memory: "64Gi", Labels: zone("eu-west", "eu-west-1b")}}},
			testbed.Options{Name: "us", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "us-a", Count: 2, CPU: "16", Memory: "64Gi", Labels: zone("us-east", "us-east-1a")}}},
		)
		consumer, eu, us = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.StartWebhookInProcess(ctx, consumer)
		framework.StartFerryScheduler(consumer)
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{})
		for _, p := range []*testbed.Cluster{eu, us} {
			framework.StartFerry(ctx, p, ferryv1alpha1.ClusterID(p.Name), framework.FerryOptions{})
			out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", p.KubeconfigPath, "--timeout", "90s")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		DeferCleanup(func() {
			AddReportEntry("placement spread wall time (BeforeAll to the last spec)", time.Since(start).Round(100*time.Millisecond).String())
		})
	})

	It("labels virtual nodes with their provider's region, its zone when its nodes agree, and its cluster; real nodes with this cluster", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			euLabels := nodeLabels(ctx, g, consumer, euNode)
			g.Expect(euLabels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "eu-west"))
			g.Expect(euLabels).NotTo(HaveKey(corev1.LabelTopologyZone), "eu's nodes are in two zones")
			g.Expect(euLabels).To(HaveKeyWithValue(ferryv1alpha1.LabelTopologyCluster, "eu"))
			usLabels := nodeLabels(ctx, g, consumer, usNode)
			g.Expect(usLabels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "us-east"))
			g.Expect(usLabels).To(HaveKeyWithValue(corev1.LabelTopologyZone, "us-east-1a"))
			g.Expect(usLabels).To(HaveKeyWithValue(ferryv1alpha1.LabelTopologyCluster, "us"))
			for i := range 3 {
				g.Expect(nodeLabels(ctx, g, consumer, fmt.Sprintf("local-%d", i))).To(HaveKeyWithValue(ferryv1alpha1.LabelTopologyCluster, "consumer"))
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("following a provider node moved to another zone: the zone no longer agrees, the region still does")
		var n corev1.Node
		Expect(us.Client.Get(ctx, client.ObjectKey{Name: "us-a-1"}, &n)).To(Succeed())
		patch := client.MergeFrom(n.DeepCopy())
		n.Labels[corev1.LabelTopologyZone] = "us-east-1b"
		Expect(us.Client.Patch(ctx, &n, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			var slice ferryv1alpha1.ResourceSlice
			g.Expect(us.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &slice)).To(Succeed())
			g.Expect(slice.Status.Labels).To(Equal(map[string]string{corev1.LabelTopologyRegion: "us-east"}), "the grant's labels")
			var vn ferryv1alpha1.VirtualNode
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: usNode}, &vn)).To(Succeed())
			g.Expect(vn.Spec.Labels).To(Equal(map[string]string{corev1.LabelTopologyRegion: "us-east"}), "the VirtualNode's labels")
			usLabels := nodeLabels(ctx, g, consumer, usNode)
			g.Expect(usLabels).NotTo(HaveKey(corev1.LabelTopologyZone), "the Node's labels")
			g.Expect(usLabels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "us-east"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("putting a real node's label right again when someone changes it")
		var local corev1.Node
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "local-0"}, &local)).To(Succeed())
		patch = client.MergeFrom(local.DeepCopy())
		local.Labels[ferryv1alpha1.LabelTopologyCluster] = "elsewhere"
		Expect(consumer.Client.Patch(ctx, &local, patch)).To(Succeed())
		Eventually(func(g Gomega) map[string]string {
			return nodeLabels(ctx, g, consumer, "local-0")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(HaveKeyWithValue(ferryv1alpha1.LabelTopologyCluster, "consumer"))
	})

	for _, scheduler := range []string{corev1.DefaultSchedulerName, ferrySchedulerName} {
		It("spreads a 9-replica Deployment 3/3/3 over this cluster and both providers under "+scheduler, func(ctx context.Context) {
			schedulerName := scheduler
			if scheduler == corev1.DefaultSchedulerName {
				schedulerName = "" // the namespace leaves pods to the default scheduler
			}
			ns, twins := offload(ctx, "spread", ferryv1alpha1.PodOffloadingLocalAndRemote, schedulerName, "eu", "us")
			Expect(consumer.Client.Create(ctx, spread(ns, "web", 9))).To(Succeed())
			sel := map[string]string{"app": "web"}
			Eventually(func(g Gomega) {
				g.Expect(perCluster(ctx, g, ns, sel)).To(Equal(map[string]int{"consumer": 3, "eu": 3, "us": 3}))
				g.Expect(remoteRunning(ctx, g, eu, twins["eu"], sel)).To(HaveLen(3))
				g.Expect(remoteRunning(ctx, g, us, twins["us"], sel)).To(HaveLen(3))
			}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
			var pods corev1.PodList
			Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sel))).To(Succeed())
			for _, p := range pods.Items {
				Expect(p.Spec.SchedulerName).To(Equal(scheduler), "pod %s", p.Name)
			}
		})
	}

	It("runs a pod of RuntimeClass ferry on the virtual node in a Local namespace, with the provider's default or the annotated RuntimeClass", func(ctx context.Context) {
		Expect(eu.Client.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata"})).To(Succeed())
		ns, twins := offload(ctx, "rc", ferryv1alpha1.PodOffloadingLocal, "", "eu")
		pod := func(name string, runtimeClass *string, annotations map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "rc"}, Annotations: annotations},
				Spec: corev1.PodSpec{RuntimeClassName: runtimeClass, Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
		}
		ferryClass := new(ferryv1alpha1.RuntimeClassVirtual)
		for _, p := range []*corev1.Pod{
			pod("opted", ferryClass, nil),
			pod("opted-kata", ferryClass, map[string]string{ferryv1alpha1.AnnotationRemoteRuntimeClass: "kata"}),
			pod("plain", nil, nil),
		} {
			Expect(consumer.Client.Create(ctx, p)).To(Succeed())
		}
		Eventually(func(g Gomega) {
			g.Expect(perCluster(ctx, g, ns, map[string]string{"app": "rc"})).To(Equal(map[string]int{"consumer": 1, "eu": 2}))
			remote := remoteRunning(ctx, g, eu, twins["eu"], map[string]string{"app": "rc"})
			g.Expect(remote).To(HaveLen(2))
			classes := map[string]string{}
			for _, r := range remote {
				classes[r.Labels[ferryv1alpha1.LabelOriginName]] = ptrString(r.Spec.RuntimeClassName)
			}
			g.Expect(classes).To(Equal(map[string]string{"opted": "<none>", "opted-kata": "kata"}), "the provider's runtime classes")
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		var opted corev1.Pod
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "opted"}, &opted)).To(Succeed())
		Expect(opted.Spec.NodeName).To(Equal(euNode))
		Expect(opted.Spec.Overhead).To(BeEmpty(), "RuntimeClass ferry has no overhead")
		Expect(opted.Annotations).To(HaveKeyWithValue("ferry.io/applied-offloading-policy", HavePrefix("strategy=Remote")))

		By("refusing a pod of RuntimeClass ferry in a namespace that is not offloaded")
		plainNS := framework.CreateNamespace(ctx, consumer, "not-offloaded")
		p := pod("opted", ferryClass, nil)
		p.Namespace = plainNS
		err := consumer.Client.Create(ctx, p)
		Expect(err).To(MatchError(And(ContainSubstring("spec.runtimeClassName"), ContainSubstring("namespace "+plainNS+" is not offloaded"))))
	})
})

func ptrString(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}
