package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// The chaos suite runs ferry as it runs in a cluster, every component a
// process of its own binary (controller managers with leader election,
// webhooks, virtual kubelets), kills them with SIGKILL and stops API
// servers and etcd, and checks after each fault that nothing was lost,
// nothing duplicated, no quota exceeded, and how long ferry took to agree
// with the world again (report entries; bounds are generous on purpose:
// the numbers are the measurement, the bounds only catch a hang).
var _ = Describe("Chaos", Label("chaos"), Ordered, func() {
	const replicas = 300
	var consumer, provider *testbed.Cluster
	var consumerCM, providerCM *framework.Proc
	var consumerWebhook, providerWebhook *framework.WebhookProc
	var ns, twin string
	virtualNode := peering.VirtualNodeName("provider")
	vkComm := "ferry-virtual-kubelet"

	virtualKubelets := func() []int { return framework.Children(consumerCM.PID(), vkComm) }
	localPods := func(ctx context.Context, g Gomega, app string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		return pods.Items
	}
	remotePods := func(ctx context.Context, g Gomega) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(provider.Client.List(ctx, &pods, client.InNamespace(twin))).To(Succeed())
		return pods.Items
	}
	shadowPods := func(ctx context.Context, g Gomega) []ferryv1alpha1.ShadowPod {
		var sps ferryv1alpha1.ShadowPodList
		g.Expect(provider.Client.List(ctx, &sps, client.InNamespace(twin))).To(Succeed())
		return sps.Items
	}
	// converged checks the invariants for app's n pods: each local pod on the
	// virtual node (never on a local one), Running, with exactly one
	// ShadowPod and one remote pod, and nothing else in the twin namespace.
	converged := func(ctx context.Context, g Gomega, app string, n int) {
		local := localPods(ctx, g, app)
		g.Expect(local).To(HaveLen(n))
		uids := map[string]bool{}
		for _, p := range local {
			g.Expect(p.Spec.NodeName).To(Equal(virtualNode), "pod %s is mis-placed", p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
			uids[string(p.UID)] = true
		}
		remote, sps := map[string]int{}, map[string]int{}
		for _, r := range remotePods(ctx, g) {
			remote[r.Labels[ferryv1alpha1.LabelOriginUID]]++
		}
		for _, sp := range shadowPods(ctx, g) {
			sps[sp.Labels[ferryv1alpha1.LabelOriginUID]]++
		}
		g.Expect(remote).To(HaveLen(len(uids)), "remote pods for other than the local pods")
		g.Expect(sps).To(HaveLen(len(uids)), "ShadowPods for other than the local pods")
		for uid := range uids {
			g.Expect(remote).To(HaveKeyWithValue(uid, 1), "remote pods of local pod %s", uid)
			g.Expect(sps).To(HaveKeyWithValue(uid, 1), "ShadowPods of local pod %s", uid)
		}
	}
	waitConverged := func(ctx context.Context, app string, n int, since time.Time, what string) {
		GinkgoHelper()
		Eventually(func(g Gomega) { converged(ctx, g, app, n) }).
			WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		AddReportEntry(what, time.Since(since).Round(10*time.Millisecond).String())
	}
	// watchInvariants samples, until the returned func is called, the
	// twin namespace and the local pods: no more ShadowPods or remote pods
	// than local pods at any time, and no local pod of app ever replaced.
	watchInvariants := func(ctx context.Context, app string) (stop func()) {
		ctx, cancel := context.WithCancel(ctx)
		var mu sync.Mutex
		var problems []string
		seen := map[types.UID]string{}
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for ctx.Err() == nil {
				var local corev1.PodList
				var sps ferryv1alpha1.ShadowPodList
				var remote corev1.PodList
				if consumer.Client.List(ctx, &local, client.InNamespace(ns), client.MatchingLabels{"app": app}) == nil &&
					provider.Client.List(ctx, &sps, client.InNamespace(twin)) == nil &&
					provider.Client.List(ctx, &remote, client.InNamespace(twin)) == nil {
					mu.Lock()
					present := map[types.UID]bool{}
					for _, p := range local.Items {
						seen[p.UID], present[p.UID] = p.Name, true
						if p.Spec.NodeName != "" && p.Spec.NodeName != virtualNode {
							problems = append(problems, fmt.Sprintf("pod %s bound to %s", p.Name, p.Spec.NodeName))
						}
					}
					for uid, name := range seen {
						if !present[uid] {
							problems = append(problems, fmt.Sprintf("pod %s (%s) disappeared", name, uid))
							delete(seen, uid)
						}
					}
					// Lists are not one snapshot: allow for pods made between them.
					if n := len(sps.Items); n > replicas {
						problems = append(problems, fmt.Sprintf("%d ShadowPods for %d replicas", n, replicas))
					}
					if n := len(remote.Items); n > replicas {
						problems = append(problems, fmt.Sprintf("%d remote pods for %d replicas", n, replicas))
					}
					mu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
		return func() {
			GinkgoHelper()
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			Expect(problems).To(BeEmpty(), "invariants broken during the faults")
		}
	}
	atLeast := func(ctx context.Context, n int) {
		GinkgoHelper()
		Eventually(func(g Gomega) int { return len(shadowPods(ctx, g)) }).
			WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(50 * time.Millisecond).Should(BeNumerically(">=", n))
	}
	nodeReady := func(ctx context.Context, g Gomega) corev1.ConditionStatus {
		var node corev1.Node
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: virtualNode}, &node)).To(Succeed())
		if c := nodeCondition(&node, corev1.NodeReady); c != nil {
			return c.Status
		}
		return ""
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "32", Memory: "128Gi", Pods: 250}}},
		)
		consumer, provider = clusters[0], clusters[1]
		cmBin, vkBin, webhookBin := framework.BuildBinary(ctx, "ferry-controller-manager"), framework.BuildVirtualKubelet(ctx), framework.BuildBinary(ctx, "ferry-webhook")
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		consumerWebhook = framework.StartWebhookProcess(ctx, webhookBin, consumer)
		providerWebhook = framework.StartWebhookProcess(ctx, webhookBin, provider)
		health := []string{"--health-check-period=500ms", "--health-check-timeout=400ms", "--health-check-failure-threshold=3"}
		consumerCM = framework.StartControllerManagerProcess(ctx, cmBin, vkBin, consumer, "consumer", health...)
		providerCM = framework.StartControllerManagerProcess(ctx, cmBin, vkBin, provider, "provider")
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "120s")
		Expect(err).NotTo(HaveOccurred(), out)
		ns = framework.CreateNamespace(ctx, consumer, "chaos")
		twin = framework.OffloadNamespace(ctx, consumer, ns, "provider")
		// Exactly the room the rollout needs: a duplicate would leave a pod
		// out, and an overrun shows in the quota's status.
		quota := &ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: peering.TenantNamespace("consumer")},
			Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "consumer", Limits: corev1.ResourceList{
				corev1.ResourcePods: *resource.NewQuantity(replicas, resource.DecimalSI), corev1.ResourceCPU: resource.MustParse("3")}}}
		Expect(provider.Client.Create(ctx, quota)).To(Succeed())
	})

	It("loses no pod, duplicates none and exceeds no quota when each of ferry's processes is SIGKILLed in the middle of a 300-pod rollout", func(ctx context.Context) {
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}}}
		stop := watchInvariants(ctx, "rollout")
		start := time.Now()
		Expect(consumer.Client.Create(ctx, deployment(ns, "rollout", replicas, spec))).To(Succeed())

		By("killing the consumer's controller manager, with the virtual kubelet it runs")
		atLeast(ctx, 30)
		consumerCM.Kill()
		AddReportEntry("ShadowPods when the consumer's controller manager was killed", fmt.Sprint(len(shadowPods(ctx, Default))))
		consumerCM.Start()

		By("killing the virtual kubelet")
		atLeast(ctx, 90)
		var vks []int
		Eventually(func() []int { vks = virtualKubelets(); return vks }).WithContext(ctx).WithTimeout(time.Minute).Should(HaveLen(1))
		Expect(syscall.Kill(vks[0], syscall.SIGKILL)).To(Succeed())
		AddReportEntry("ShadowPods when the virtual kubelet was killed", fmt.Sprint(len(shadowPods(ctx, Default))))

		By("killing the consumer's webhook for 3 s")
		atLeast(ctx, 150)
		consumerWebhook.Kill()
		time.Sleep(3 * time.Second)
		consumerWebhook.Restart(ctx)

		By("killing the provider's controller manager")
		atLeast(ctx, 200)
		providerCM.Kill()
		providerCM.Start()

		By("killing the provider's webhook for 3 s")
		atLeast(ctx, 250)
		providerWebhook.Kill()
		time.Sleep(3 * time.Second)
		providerWebhook.Restart(ctx)
		last := time.Now()

		waitConverged(ctx, "rollout", replicas, last, "converged after the last restart")
		AddReportEntry("300-pod rollout through five kills, end to end", time.Since(start).Round(10*time.Millisecond).String())
		stop()
		Expect(virtualKubelets()).To(HaveLen(1), "one virtual kubelet serves the node")
		var quota ferryv1alpha1.PeeringQuota
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: peering.TenantNamespace("consumer"), Name: "consumer"}, &quota)).To(Succeed())
			g.Expect(quota.Status.Used.Pods().Value()).To(BeEquivalentTo(replicas))
			g.Expect(quota.Status.Used.Cpu().Cmp(resource.MustParse("3"))).To(Equal(0))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("refuses pods of offloaded namespaces while the webhook is down (failurePolicy Fail), never mis-places them, and leaves other namespaces alone", func(ctx context.Context) {
		By("making room in the quota for two more pods")
		quota := &ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: peering.TenantNamespace("consumer")}}
		Expect(provider.Client.Patch(ctx, quota, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"spec":{"limits":{"pods":"%d"}}}`, replicas+2))))).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(provider.Client.Patch(ctx, quota, client.RawPatch(types.MergePatchType,
				[]byte(fmt.Sprintf(`{"spec":{"limits":{"pods":"%d"}}}`, replicas))))).To(Succeed())
		})
		consumerWebhook.Kill()
		pod := func(namespace, name string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": "single"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
		}
		err := consumer.Client.Create(ctx, pod(ns, "while-down"))
		Expect(err).To(MatchError(ContainSubstring("failed calling webhook")), "a pod of an offloaded namespace admitted without the webhook")
		plain := framework.CreateNamespace(ctx, consumer, "plain")
		Expect(consumer.Client.Create(ctx, pod(plain, "elsewhere"))).To(Succeed(), "a namespace that is not offloaded does not call the webhook")

		consumerWebhook.Restart(ctx)
		Expect(consumer.Client.Create(ctx, pod(ns, "after"))).To(Succeed())
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "after"}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(Equal(virtualNode))
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())

		By("with the provider's webhook down, a new pod waits (not offloaded) and runs once it is back")
		providerWebhook.Kill()
		Expect(consumer.Client.Create(ctx, pod(ns, "provider-down"))).To(Succeed())
		var waiting *corev1.PodCondition
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "provider-down"}, &p)).To(Succeed())
			g.Expect(p.Spec.NodeName).To(Equal(virtualNode))
			waiting = podCondition(&p, ferryv1alpha1.PodConditionOffloaded)
			g.Expect(waiting).NotTo(BeNil())
			g.Expect(waiting.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		AddReportEntry("the pod's condition while the provider's webhook is down", waiting.Reason+": "+waiting.Message)
		back := time.Now()
		providerWebhook.Restart(ctx)
		Eventually(func(g Gomega) corev1.PodPhase {
			var p corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "provider-down"}, &p)).To(Succeed())
			return p.Status.Phase
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Equal(corev1.PodRunning))
		AddReportEntry("pod Running after the provider's webhook returned", time.Since(back).Round(10*time.Millisecond).String())
		for _, name := range []string{"after", "provider-down"} {
			Expect(consumer.Client.Delete(ctx, pod(ns, name), client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(func(g Gomega) []corev1.Pod { return remotePods(ctx, g) }).WithContext(ctx).WithTimeout(time.Minute).Should(HaveLen(replicas))
	})

	// controllersUp waits until both controller managers run (one may be in
	// its restart backoff after an outage).
	controllersUp := func(ctx context.Context) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(consumerCM.PID()).NotTo(BeZero(), "the consumer's controller manager is not running")
			g.Expect(providerCM.PID()).NotTo(BeZero(), "the provider's controller manager is not running")
		}).WithContext(ctx).WithTimeout(6 * time.Minute).Should(Succeed())
	}
	// serving waits until one virtual kubelet runs and renewed its node's Lease after since (a
	// node's Ready condition can be a stale report from before an outage),
	// then reports how long that took after since as what.
	serving := func(ctx context.Context, since time.Time, what string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			g.Expect(virtualKubelets()).To(HaveLen(1))
			var lease coordinationv1.Lease
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: virtualNode}, &lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
			g.Expect(lease.Spec.RenewTime.After(since)).To(BeTrue(), "the virtual node's lease was last renewed at %s", lease.Spec.RenewTime)
			g.Expect(nodeReady(ctx, g)).To(Equal(corev1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(5 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
		if what != "" {
			AddReportEntry(what, time.Since(since).Round(10*time.Millisecond).String())
		}
	}

	// restarts reports how often each controller manager was restarted after
	// exiting on its own since before, and checks it did not crash-loop.
	restarts := func(since [2]int) {
		GinkgoHelper()
		n := [2]int{consumerCM.Restarts() - since[0], providerCM.Restarts() - since[1]}
		AddReportEntry("controller manager restarts (consumer, provider)", fmt.Sprint(n[0], ", ", n[1]))
		Expect(n).To(HaveEach(BeNumerically("<=", 4)), "a controller manager restarted more often than the kubelet's backoff allows in the outage")
	}

	It("says clearly that a revoked credential is refused, without crash loops or touching remote pods, and runs on with a reissued one", func(ctx context.Context) {
		controllersUp(ctx)
		serving(ctx, time.Now(), "")
		remoteUIDs := map[types.UID]bool{}
		for _, r := range remotePods(ctx, Default) {
			remoteUIDs[r.UID] = true
		}
		vks := virtualKubelets()
		Expect(vks).To(HaveLen(1))
		before := [2]int{consumerCM.Restarts(), providerCM.Restarts()}
		authenticated := func(g Gomega) *metav1.Condition {
			var fc ferryv1alpha1.ForeignCluster
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "provider"}, &fc)).To(Succeed())
			c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterAuthenticated)
			g.Expect(c).NotTo(BeNil())
			return c
		}

		By("revoking it: the provider's admin deletes the consumer's ServiceAccount")
		Expect(provider.Client.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Namespace: peering.TenantNamespace("consumer"), Name: ferryv1alpha1.ConsumerServiceAccount}})).To(Succeed())
		revoked := time.Now()
		var refused *metav1.Condition
		Eventually(func(g Gomega) {
			refused = authenticated(g)
			g.Expect(refused.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(refused.Reason).To(Equal("Unauthorized"))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		AddReportEntry("ForeignCluster Authenticated=False after the revocation", time.Since(revoked).Round(10*time.Millisecond).String()+": "+refused.Message)
		Consistently(func(g Gomega) {
			g.Expect(virtualKubelets()).To(Equal(vks), "the virtual kubelet restarted with a refused credential")
			g.Expect(remotePods(ctx, g)).To(HaveLen(replicas))
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("virtual node Ready while the credential is refused", string(nodeReady(ctx, Default)))

		By("reissuing it with ferryctl peer --reissue-credential")
		reissued := time.Now()
		out, err := ferryctl(ctx, "peer", "--reissue-credential", "--consumer-kubeconfig", consumer.KubeconfigPath,
			"--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "120s")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			g.Expect(virtualKubelets()).To(HaveLen(1))
			g.Expect(virtualKubelets()).NotTo(Equal(vks), "the virtual kubelet still runs with the revoked credential")
			g.Expect(nodeReady(ctx, g)).To(Equal(corev1.ConditionTrue))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
		AddReportEntry("virtual kubelet restarted with the new credential, node Ready, from the start of ferryctl", time.Since(reissued).Round(10*time.Millisecond).String())
		waitConverged(ctx, "rollout", replicas, reissued, "pods converged, from the start of ferryctl")
		for _, r := range remotePods(ctx, Default) {
			Expect(remoteUIDs).To(HaveKey(r.UID), "remote pod %s was recreated", r.Name)
		}
		restarts(before)
	})

	// before is what the faults must leave alone: the remote pods, the
	// virtual kubelet's process, and the controller managers' restarts.
	type before struct {
		remote   map[types.UID]bool
		vks      []int
		restarts [2]int
	}
	steady := func(ctx context.Context) before {
		GinkgoHelper()
		controllersUp(ctx)
		serving(ctx, time.Now(), "")
		b := before{remote: map[types.UID]bool{}, vks: virtualKubelets(), restarts: [2]int{consumerCM.Restarts(), providerCM.Restarts()}}
		for _, r := range remotePods(ctx, Default) {
			b.remote[r.UID] = true
		}
		Expect(b.remote).To(HaveLen(replicas))
		Expect(b.vks).To(HaveLen(1))
		return b
	}
	// recovered waits for the virtual kubelet and the pods after a fault
	// ended at back, reporting both times as after what, and checks that no
	// remote pod was recreated and nothing restarted that need not.
	recovered := func(ctx context.Context, b before, back time.Time, what string) {
		GinkgoHelper()
		serving(ctx, back, "virtual kubelet serving its node again (Lease renewed, Ready) after "+what)
		waitConverged(ctx, "rollout", replicas, back, "pods converged after "+what)
		for _, r := range remotePods(ctx, Default) {
			Expect(b.remote).To(HaveKey(r.UID), "remote pod %s was recreated", r.Name)
		}
		controllersUp(ctx)
		restarts(b.restarts)
		if consumerCM.Restarts() == b.restarts[0] {
			Expect(virtualKubelets()).To(Equal(b.vks), "the virtual kubelet was restarted though its controller manager was not")
		}
	}

	for _, side := range []string{"provider", "consumer"} {
		It(fmt.Sprintf("keeps remote pods untouched through 60 s without the %s's API server, and converges after it", side), func(ctx context.Context) {
			c := consumer
			if side == "provider" {
				c = provider
			}
			b := steady(ctx)
			down := time.Now()
			c.StopAPIServer()
			if side == "provider" {
				Eventually(func(g Gomega) corev1.ConditionStatus { return nodeReady(ctx, g) }).
					WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(corev1.ConditionUnknown))
				AddReportEntry("virtual node Ready=Unknown after the provider's API server began to stop", time.Since(down).Round(10*time.Millisecond).String())
			}
			time.Sleep(time.Until(down.Add(60 * time.Second)))
			Expect(c.StartAPIServer(ctx)).To(Succeed())
			recovered(ctx, b, time.Now(), "the API server returned")
		})
	}

	It("keeps remote pods untouched through a restart of the provider's etcd", func(ctx context.Context) {
		b := steady(ctx)
		Expect(provider.RestartEtcd(ctx, 10*time.Second)).To(Succeed())
		recovered(ctx, b, time.Now(), "etcd returned")
	})

})
