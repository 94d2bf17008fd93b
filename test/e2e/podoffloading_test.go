package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
)

// remoteDeployment is a Deployment whose pods go to ferry's virtual nodes
// by their own toleration and node selector (no webhook needed).
func remoteDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	return deployment(namespace, name, replicas, remotePodSpec())
}

func deployment(namespace, name string, replicas int32, spec corev1.PodSpec) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func remotePodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual},
		Tolerations:  []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}},
	}
}

// guaranteedCPU is q CPUs requested and limited.
func guaranteedCPU(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)},
		Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
}

// createCPUPod creates a pod of spec with 100m CPU in c, deleted when the
// spec ends.
func createCPUPod(ctx context.Context, c *testbed.Cluster, ns, name string, spec corev1.PodSpec, labels map[string]string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: spec}
	p.Spec.Containers[0].Resources = guaranteedCPU("100m")
	Expect(c.Client.Create(ctx, p)).To(Succeed())
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(c.Client.Delete(ctx, p, client.GracePeriodSeconds(0)))).To(Succeed())
	})
	return p
}

// resizeCPU resizes p's first container to q CPUs through the resize
// subresource.
func resizeCPU(ctx context.Context, c *testbed.Cluster, p *corev1.Pod, q string) error {
	GinkgoHelper()
	var cur corev1.Pod
	Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(p), &cur)).To(Succeed())
	cur.Spec.Containers[0].Resources = guaranteedCPU(q)
	_, err := c.Kube.CoreV1().Pods(cur.Namespace).UpdateResize(ctx, cur.Name, &cur, metav1.UpdateOptions{})
	return err
}

// expectRunningWithCPU reads p from c and expects it Running with want CPUs
// in its container's status (resources and allocatedResources), as the
// provider's kubelet reports them.
func expectRunningWithCPU(ctx context.Context, g Gomega, c *testbed.Cluster, p *corev1.Pod, want string) {
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
	g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
	g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
	r := p.Status.ContainerStatuses[0].Resources
	g.Expect(r).NotTo(BeNil(), "the provider's container resources come back")
	g.Expect(r.Requests.Cpu().Cmp(resource.MustParse(want))).To(BeZero(), "requests %v", r.Requests)
	g.Expect(p.Status.ContainerStatuses[0].AllocatedResources.Cpu().Cmp(resource.MustParse(want))).To(BeZero())
}

// remoteCPU is the CPU request of the first container of pod name in the
// provider's namespace twin.
func remoteCPU(ctx context.Context, g Gomega, provider *testbed.Cluster, twin, name string) *resource.Quantity {
	var r corev1.Pod
	g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, &r)).To(Succeed())
	return r.Spec.Containers[0].Resources.Requests.Cpu()
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

var _ = Describe("Pod offloading", Label("offloading"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	var consumerFerry *framework.Ferry
	var network framework.PeerNetwork
	var ns, twin string
	virtualNode := peering.VirtualNodeName("provider")
	vnKey := types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: virtualNode}

	// localPods lists the pods of the namespace bound to the virtual node.
	localPods := func(ctx context.Context, g Gomega, selector map[string]string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
		return pods.Items
	}
	remotePods := func(ctx context.Context, g Gomega, selector map[string]string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin), client.MatchingLabels(selector))).To(Succeed())
		return pods.Items
	}
	shadowPods := func(ctx context.Context, g Gomega) []ferryv1alpha1.ShadowPod {
		var sps ferryv1alpha1.ShadowPodList
		g.Expect(provider.Client.List(ctx, &sps, client.InNamespace(twin))).To(Succeed())
		return sps.Items
	}
	// expectConverged checks that every local pod of app runs remotely with
	// exactly one ShadowPod and one real pod, and nothing else is there.
	expectConverged := func(ctx context.Context, app string, replicas int) {
		GinkgoHelper()
		sel := map[string]string{"app": app}
		Eventually(func(g Gomega) {
			local := localPods(ctx, g, sel)
			g.Expect(local).To(HaveLen(replicas))
			remote := remotePods(ctx, g, sel)
			g.Expect(remote).To(HaveLen(replicas))
			byUID := map[string]corev1.Pod{}
			for _, r := range remote {
				byUID[r.Labels[ferryv1alpha1.LabelOriginUID]] = r
			}
			for _, p := range local {
				g.Expect(p.Spec.NodeName).To(Equal(virtualNode))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				r, ok := byUID[string(p.UID)]
				g.Expect(ok).To(BeTrue(), "pod %s has no remote pod", p.Name)
				g.Expect(p.Status.PodIP).To(Equal(network.ProviderPodIP(r.Status.PodIP)),
					"the local pod shows the remote pod's IP remapped by the network fabric (both clusters use %s)", r.Status.PodIP)
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
				g.Expect(podCondition(&p, corev1.PodReady).Status).To(Equal(corev1.ConditionTrue))
				g.Expect(podCondition(&p, ferryv1alpha1.PodConditionOffloaded)).To(HaveField("Status", corev1.ConditionTrue))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	}

	// awaitProviderRunsPods waits until a pod created directly on the
	// provider is scheduled and Running, and reports how long that took.
	awaitProviderRunsPods := func(ctx context.Context) {
		GinkgoHelper()
		start := time.Now()
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "scheduling-probe-", Namespace: metav1.NamespaceDefault},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example/probe:v1"}}}}
		Expect(provider.Client.Create(ctx, probe)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(provider.Client.Delete(ctx, probe, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
			g.Expect(probe.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(120*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "a pod created on the provider runs")
		AddReportEntry("the provider ran a pod of its own again after", time.Since(start).Round(10*time.Millisecond).String())
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 3, CPU: "32", Memory: "128Gi", Pods: 250}}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
		consumerFerry = framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{Health: health, VirtualKubeletBinary: framework.BuildVirtualKubelet(ctx)})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{Health: health})
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)

		network = framework.WaitPeerNetwork(ctx, consumer, "consumer", "provider")
		ns = framework.CreateNamespace(ctx, consumer, "shop")
		twin = framework.OffloadNamespace(ctx, consumer, ns, "provider")
	})

	It("runs a 50-pod Deployment remotely, Running locally with the remote statuses, and converges on scale, update and delete", func(ctx context.Context) {
		start := time.Now()
		Expect(consumer.Client.Create(ctx, remoteDeployment(ns, "web", 50))).To(Succeed())
		expectConverged(ctx, "web", 50)
		AddReportEntry("50 offloaded pods Running locally", time.Since(start).Round(100*time.Millisecond).String())
		Eventually(func(g Gomega) { g.Expect(shadowPods(ctx, g)).To(HaveLen(50)) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("scaling down to 20")
		var d appsv1.Deployment
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		d.Spec.Replicas = new(int32(20))
		Expect(consumer.Client.Update(ctx, &d)).To(Succeed())
		expectConverged(ctx, "web", 20)
		Eventually(func(g Gomega) { g.Expect(shadowPods(ctx, g)).To(HaveLen(20)) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("rolling out a new image")
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:v2"
		Expect(consumer.Client.Update(ctx, &d)).To(Succeed())
		Eventually(func(g Gomega) {
			remote := remotePods(ctx, g, map[string]string{"app": "web"})
			g.Expect(remote).To(HaveLen(20))
			for _, r := range remote {
				g.Expect(r.Spec.Containers[0].Image).To(Equal("registry.example/app:v2"))
			}
		}).WithContext(ctx).WithTimeout(120 * time.Second).Should(Succeed())
		expectConverged(ctx, "web", 20)

		By("deleting the Deployment")
		Expect(consumer.Client.Delete(ctx, &d, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(localPods(ctx, g, map[string]string{"app": "web"})).To(BeEmpty())
			g.Expect(remotePods(ctx, g, map[string]string{"app": "web"})).To(BeEmpty())
			g.Expect(shadowPods(ctx, g)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	})

	It("serves kubectl logs (follow), exec with stdin, port-forward and stats of an offloaded pod through the consumer's API server", func(ctx context.Context) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debug", Namespace: ns}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		expectKubeletAPI(ctx, consumer, provider, ns, pod.Name, virtualNode)
		Expect(consumer.Client.Delete(ctx, pod)).To(Succeed())
	})

	It("brings back a pod deleted on the provider and counts it as a restart; carries label updates", func(ctx context.Context) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: ns, Labels: map[string]string{"app": "solo"}}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		expectConverged(ctx, "solo", 1)
		var first corev1.Pod
		Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "solo"}, &first)).To(Succeed())

		By("deleting the remote pod behind ferry's back")
		Expect(provider.Client.Delete(ctx, &first)).To(Succeed())
		Eventually(func(g Gomega) {
			var again corev1.Pod
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "solo"}, &again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(first.UID))
			var local corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &local)).To(Succeed())
			g.Expect(local.Status.Phase).To(Equal(corev1.PodRunning))
			// kwok deletes a terminating pod by name, without a UID
			// precondition, and now and then deletes the recreated one too:
			// every recreation counts, so the count is the ShadowPod's.
			var sp ferryv1alpha1.ShadowPod
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "solo"}, &sp)).To(Succeed())
			g.Expect(sp.Status.Recreations).To(BeNumerically(">=", 1))
			g.Expect(local.Status.ContainerStatuses).To(ConsistOf(HaveField("RestartCount", sp.Status.Recreations)))
			g.Expect(local.UID).To(Equal(pod.UID), "the local pod is the same")
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		By("labelling the local pod")
		Expect(consumer.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"gold"},"annotations":{"owner":"shop-team"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			var r corev1.Pod
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "solo"}, &r)).To(Succeed())
			g.Expect(r.Labels).To(HaveKeyWithValue("tier", "gold"))
			g.Expect(r.Annotations).To(HaveKeyWithValue("owner", "shop-team"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("deleting it locally with a grace period")
		Expect(consumer.Client.Delete(ctx, pod, client.GracePeriodSeconds(20))).To(Succeed())
		Eventually(func(g Gomega) {
			err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "local pod still there: %v", err)
			g.Expect(remotePods(ctx, g, map[string]string{"app": "solo"})).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(15*time.Second).Should(Succeed(), "gone on both sides well before the grace period: the remote pod stopped at once")
	})

	It("keeps a pod the provider cannot schedule Pending, with the provider scheduler's reason, not as running remotely, and still scheduled here", func(ctx context.Context) {
		// 40 CPUs fit the virtual node (the grant sums three 32-CPU nodes)
		// but no node of the provider.
		big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns}, Spec: remotePodSpec()}
		big.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40")}
		Expect(consumer.Client.Create(ctx, big)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, big, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(big), big)).To(Succeed())
			g.Expect(big.Spec.NodeName).NotTo(BeEmpty(), "bound to the virtual node")
			c := podCondition(big, ferryv1alpha1.PodConditionOffloaded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(offloading.ReasonPendingRemotely))
			g.Expect(c.Message).To(MatchRegexp(`Unschedulable: 0/3 nodes are available: .*Insufficient cpu`))
			// Bound here by the consumer's scheduler: PodScheduled stays its
			// True, not the provider scheduler's False.
			g.Expect(podCondition(big, corev1.PodScheduled)).To(HaveField("Status", corev1.ConditionTrue))
			var events corev1.EventList
			g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "big"), HaveField("Reason", offloading.ReasonPendingRemotely),
				HaveField("Message", ContainSubstring("0/3 nodes are available")))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(big), big)).To(Succeed())
			g.Expect(big.Status.Phase).To(Equal(corev1.PodPending))
			g.Expect(podCondition(big, ferryv1alpha1.PodConditionOffloaded).Reason).To(Equal(offloading.ReasonPendingRemotely))
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("refuses a pod using host namespaces, and shows the provider's refusal on the local pod", func(ctx context.Context) {
		host := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "host", Namespace: ns}, Spec: remotePodSpec()}
		host.Spec.HostNetwork = true
		Expect(consumer.Client.Create(ctx, host)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(host), host)).To(Succeed())
			g.Expect(host.Status.Phase).To(Equal(corev1.PodFailed))
			g.Expect(host.Status.Reason).To(Equal(offloading.ReasonOffloadingRefused))
			g.Expect(host.Status.Message).To(ContainSubstring("spec.hostNetwork"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("a quota on the provider that admits no pod")
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-pods", Namespace: twin},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
		Expect(provider.Client.Create(ctx, quota)).To(Succeed())
		// Admission refuses everything under a quota whose status is not
		// computed yet, with another message; the quota controller computes
		// it when its monitors of every resource have synced, which on a
		// busy machine can take long. The status it would write is known.
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			if len(quota.Status.Hard) == 0 {
				quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
				g.Expect(provider.Client.Status().Update(ctx, quota)).To(Succeed())
			}
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		rejected := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rejected", Namespace: ns}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, rejected)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(rejected), rejected)).To(Succeed())
			c := podCondition(rejected, ferryv1alpha1.PodConditionOffloaded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(offloading.ReasonShadowPodRejected))
			g.Expect(c.Message).To(ContainSubstring("exceeded quota"))
			var events corev1.EventList
			g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", "rejected"), HaveField("Reason", offloading.ReasonShadowPodRejected))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("lifting the quota: the pod runs")
		Expect(provider.Client.Delete(ctx, quota)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(rejected), rejected)).To(Succeed())
			g.Expect(rejected.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		for _, p := range []*corev1.Pod{host, rejected} {
			Expect(consumer.Client.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
	})

	It("resizes an offloaded pod in place on the provider and reports the result back; refuses it when the provider's nodes cannot resize", func(ctx context.Context) {
		// kwok runs pods labelled KwokResizeLabel as a resizing kubelet does
		// (container resources in the status, following the spec at once);
		// the label reaches the provider's pod with the pod's other labels.
		p := createCPUPod(ctx, consumer, ns, "resizable", remotePodSpec(), map[string]string{testbed.KwokResizeLabel: "true"})
		Eventually(func(g Gomega) { expectRunningWithCPU(ctx, g, consumer, p, "100m") }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		By("a resize through the resize subresource reaches the provider's pod, and its result comes back")
		Expect(resizeCPU(ctx, consumer, p, "200m")).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(remoteCPU(ctx, g, provider, twin, p.Name).Cmp(resource.MustParse("200m"))).To(BeZero(), "the provider's pod is resized")
			expectRunningWithCPU(ctx, g, consumer, p, "200m")
			g.Expect(podCondition(p, corev1.PodResizePending)).To(BeNil())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("a provider whose nodes report no container resources: the resize is refused, as the API server refuses it for any such node")
		plain := createCPUPod(ctx, consumer, ns, "not-resizable", remotePodSpec(), nil)
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(plain), plain)).To(Succeed())
			g.Expect(plain.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		Expect(resizeCPU(ctx, consumer, plain, "200m")).To(MatchError(ContainSubstring("Pod running on node without support for resize")))
	})

	It("loses no pod and makes no duplicate when the virtual kubelet is SIGKILLed in the middle of offloading", func(ctx context.Context) {
		Expect(consumer.Client.Create(ctx, remoteDeployment(ns, "batch", 40))).To(Succeed())
		Eventually(func(g Gomega) int { return len(shadowPods(ctx, g)) }).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(20 * time.Millisecond).Should(BeNumerically(">=", 5))
		pid := consumerFerry.Processes.PID(vnKey)
		Expect(pid).NotTo(BeZero())
		Expect(syscall.Kill(pid, syscall.SIGKILL)).To(Succeed())
		AddReportEntry("shadow pods when the virtual kubelet was killed", fmt.Sprint(len(shadowPods(ctx, Default))))
		Eventually(func() int { return consumerFerry.Processes.PID(vnKey) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeZero())
		restart := time.Now()
		Expect(consumerFerry.Processes.Ensure(ctx, vnKey)).To(Succeed(), "start it again, as the controller manager does on its next round")
		expectConverged(ctx, "batch", 40)
		AddReportEntry("converged after the virtual kubelet's restart", time.Since(restart).String())
		Eventually(func(g Gomega) { g.Expect(shadowPods(ctx, g)).To(HaveLen(40)) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("shows offloaded pods not Ready, out of their Service's endpoints, within the node-monitor grace period while the provider is unreachable, and Ready again from fresh status once it is back", Label("chaos"), func(ctx context.Context) {
		// kube-controller-manager's --node-monitor-grace-period, not set by
		// the test bed: a kubelet silent that long has its pods marked not Ready.
		const nodeMonitorGracePeriod = 50 * time.Second
		const app, replicas = "readiness", 3
		sel := map[string]string{"app": app}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80}}}}
		Expect(consumer.Client.Create(ctx, remoteDeployment(ns, app, replicas))).To(Succeed())
		Expect(consumer.Client.Create(ctx, svc)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app}}))).To(Succeed())
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, svc))).To(Succeed())
		})
		// readiness checks every pod of app Running with Ready and
		// ContainersReady at want (reason ProviderUnreachable when False),
		// and the Service's endpoints all ready or all not.
		readiness := func(want corev1.ConditionStatus) func(g Gomega) {
			return func(g Gomega) {
				pods := localPods(ctx, g, sel)
				g.Expect(pods).To(HaveLen(replicas))
				for _, p := range pods {
					g.Expect(p.Spec.NodeName).To(Equal(virtualNode))
					g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s: the phase stays as last known", p.Name)
					for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
						c := podCondition(&p, t)
						g.Expect(c).NotTo(BeNil(), "pod %s has no %s condition", p.Name, t)
						g.Expect(c.Status).To(Equal(want), "pod %s: %s", p.Name, t)
						if want == corev1.ConditionFalse {
							g.Expect(c.Reason).To(Equal(offloading.ReasonProviderUnreachable), "pod %s: %s", p.Name, t)
						}
					}
				}
				var eps discoveryv1.EndpointSliceList
				g.Expect(consumer.Client.List(ctx, &eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: app})).To(Succeed())
				ready, notReady := 0, 0
				for _, s := range eps.Items {
					for _, e := range s.Endpoints {
						if e.Conditions.Ready != nil && *e.Conditions.Ready {
							ready++
						} else {
							notReady++
						}
					}
				}
				if want == corev1.ConditionTrue {
					g.Expect([]int{ready, notReady}).To(Equal([]int{replicas, 0}), "the Service's endpoints (ready, not ready)")
				} else {
					g.Expect(ready).To(BeZero(), "ready endpoints of the Service")
				}
			}
		}
		Eventually(readiness(corev1.ConditionTrue)).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

		By("the provider's API server stops: every pod not Ready within the grace period, its last known phase kept")
		down := time.Now()
		provider.StopAPIServer()
		Eventually(readiness(corev1.ConditionFalse)).WithContext(ctx).WithTimeout(nodeMonitorGracePeriod-time.Since(down)).WithPolling(250*time.Millisecond).
			Should(Succeed(), "a kubelet unheard for the node-monitor grace period has its pods marked not Ready")
		AddReportEntry("pods not Ready and out of the Service's endpoints after the provider's API server began to stop", time.Since(down).Round(10*time.Millisecond).String())
		Consistently(readiness(corev1.ConditionFalse)).WithContext(ctx).WithTimeout(5*time.Second).WithPolling(250*time.Millisecond).
			Should(Succeed(), "nothing brings the last known Ready status back while the provider is away")

		By("the provider returns: Ready again, as the provider reports it")
		Expect(provider.StartAPIServer(ctx)).To(Succeed())
		back := time.Now()
		Eventually(readiness(corev1.ConditionTrue)).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry("pods Ready and in the Service's endpoints again after the provider's API server returned", time.Since(back).Round(10*time.Millisecond).String())
	})

	It("keeps remote pods running through a provider outage and converges after it without restarting anything", func(ctx context.Context) {
		before := map[types.UID]int32{}
		remoteUIDs := map[types.UID]bool{}
		for _, r := range remotePods(ctx, Default, map[string]string{"app": "batch"}) {
			remoteUIDs[r.UID] = true
		}
		for _, p := range localPods(ctx, Default, map[string]string{"app": "batch"}) {
			before[p.UID] = p.Status.ContainerStatuses[0].RestartCount
		}
		Expect(before).To(HaveLen(40))
		pid := consumerFerry.Processes.PID(vnKey)

		provider.StopAPIServer()
		Eventually(func(g Gomega) corev1.ConditionStatus {
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			return nodeCondition(&node, corev1.NodeReady).Status
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(corev1.ConditionUnknown))
		Consistently(func(g Gomega) { g.Expect(localPods(ctx, g, map[string]string{"app": "batch"})).To(HaveLen(40)) }).
			WithContext(ctx).WithTimeout(3*time.Second).Should(Succeed(), "local pods stay while the provider is away")
		Expect(provider.StartAPIServer(ctx)).To(Succeed())
		back := time.Now()

		expectConverged(ctx, "batch", 40)
		AddReportEntry("converged after the provider's API server returned", time.Since(back).String())
		for _, p := range localPods(ctx, Default, map[string]string{"app": "batch"}) {
			Expect(before).To(HaveKeyWithValue(p.UID, p.Status.ContainerStatuses[0].RestartCount), "pod %s was replaced or restarted", p.Name)
		}
		for _, r := range remotePods(ctx, Default, map[string]string{"app": "batch"}) {
			Expect(remoteUIDs).To(HaveKey(r.UID), "remote pod %s was recreated", r.Name)
		}
		Expect(consumerFerry.Processes.PID(vnKey)).To(Equal(pid), "the virtual kubelet was restarted")
	})

	It("evicts what does not tolerate an unreachable provider, runs it elsewhere, and removes the orphaned remote copies once the provider is back", Label("chaos"), func(ctx context.Context) {
		// The specs before restarted the provider's API server: its
		// kube-scheduler's watches list again with client-go's back-off (up
		// to 30 s, doubled by jitter), and the pods below would wait for it.
		awaitProviderRunsPods(ctx)
		// The local node is cordoned while the pods are placed, so that they
		// all land on the virtual node; the replacements then run locally.
		var local corev1.Node
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "local-0"}, &local)).To(Succeed())
		cordon := func(ctx context.Context, on bool) {
			patch := client.MergeFrom(local.DeepCopy())
			local.Spec.Unschedulable = on
			Expect(consumer.Client.Patch(ctx, &local, patch)).To(Succeed())
		}
		cordon(ctx, true)
		DeferCleanup(func(ctx context.Context) { cordon(ctx, false) })
		unreachable := func(seconds *int64) corev1.Toleration {
			return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
		}
		spec := corev1.PodSpec{
			Tolerations: []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}, unreachable(ptr.To[int64](5))},
			Containers:  []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
		}
		Expect(consumer.Client.Create(ctx, deployment(ns, "evictable", 2, spec))).To(Succeed())
		tolerant := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "tolerant", Namespace: ns, Labels: map[string]string{"app": "tolerant"}}, Spec: remotePodSpec()}
		tolerant.Spec.Tolerations = append(tolerant.Spec.Tolerations, unreachable(nil))
		Expect(consumer.Client.Create(ctx, tolerant)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evictable"}}))).To(Succeed())
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, tolerant, client.GracePeriodSeconds(0)))).To(Succeed())
		})
		var evicted []types.UID
		Eventually(func(g Gomega) {
			pods := localPods(ctx, g, map[string]string{"app": "evictable"})
			g.Expect(pods).To(HaveLen(2))
			evicted = nil
			for _, p := range append(pods, *tolerant) {
				if p.Name == tolerant.Name {
					g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(tolerant), &p)).To(Succeed())
				}
				g.Expect(p.Spec.NodeName).To(Equal(virtualNode), "pod %s", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				if p.Name != tolerant.Name {
					evicted = append(evicted, p.UID)
				}
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		cordon(ctx, false)

		tolerantRemote := remotePods(ctx, Default, map[string]string{"app": "tolerant"})
		Expect(tolerantRemote).To(HaveLen(1))

		By("the provider's API server stops: unreachable taints, eviction after 5 s, replacements run locally; the tolerant pod stays")
		provider.StopAPIServer()
		Eventually(func(g Gomega) {
			var node corev1.Node
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
			g.Expect(node.Spec.Taints).To(ContainElement(And(HaveField("Key", corev1.TaintNodeUnreachable), HaveField("Effect", corev1.TaintEffectNoExecute))))
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "the node lifecycle controller taints the node")
		Eventually(func(g Gomega) {
			running := 0
			for _, p := range localPods(ctx, g, map[string]string{"app": "evictable"}) {
				if slices.Contains(evicted, p.UID) {
					g.Expect(p.DeletionTimestamp).NotTo(BeNil(), "pod %s outlived its tolerationSeconds", p.Name)
					continue
				}
				g.Expect(p.Spec.NodeName).To(Equal("local-0"), "replacement %s", p.Name)
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			g.Expect(running).To(Equal(2))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(tolerant), tolerant)).To(Succeed())
		Expect(tolerant.DeletionTimestamp).To(BeNil(), "the pod tolerating unreachable was evicted")

		By("the provider returns: the evicted pods' remote copies go, nothing runs twice, the tolerant pod is untouched")
		back := time.Now()
		Expect(provider.StartAPIServer(ctx)).To(Succeed())
		// Measured 17–47 s; once, in a full make test run beside the real
		// nodes' specs, over 90 s (not attributed): the bound is 150 s.
		Eventually(func(g Gomega) {
			g.Expect(remotePods(ctx, g, map[string]string{"app": "evictable"})).To(BeEmpty(), "remote copies of evicted pods")
			for _, sp := range shadowPods(ctx, g) {
				g.Expect(sp.Spec.Template.Metadata.Labels).NotTo(HaveKeyWithValue("app", "evictable"), "ShadowPod %s", sp.Name)
			}
			for _, p := range localPods(ctx, g, map[string]string{"app": "evictable"}) {
				g.Expect(evicted).NotTo(ContainElement(p.UID), "evicted pod %s still there", p.Name)
			}
		}).WithContext(ctx).WithTimeout(150*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(),
			"bounded by the virtual kubelet's watches of the provider listing again (client-go backs off up to 30 s)")
		AddReportEntry("orphaned remote copies removed after the provider returned", time.Since(back).String())
		remote := remotePods(ctx, Default, map[string]string{"app": "tolerant"})
		Expect(remote).To(HaveLen(1))
		Expect(remote[0].UID).To(Equal(tolerantRemote[0].UID), "the tolerant pod's remote copy was replaced")
	})

})
