package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	nsoffloading "github.com/ferry-io/ferry/controllers/offloading"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

var _ = Describe("Namespace offloading", Label("offloading"), Ordered, func() {
	const (
		home = ferryv1alpha1.ClusterID("home")
		eu   = ferryv1alpha1.ClusterID("eu")
		us   = ferryv1alpha1.ClusterID("us")
		tier = "example.com/tier"
	)
	var consumer *testbed.Cluster
	providers := map[ferryv1alpha1.ClusterID]*testbed.Cluster{}
	tenant := peering.TenantNamespace(home)
	gold := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: tier, Operator: corev1.NodeSelectorOpIn, Values: []string{"gold"}}}}}}

	offloadingOf := func(ctx context.Context, g Gomega, ns string) *ferryv1alpha1.NamespaceOffloading {
		var nso ferryv1alpha1.NamespaceOffloading
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		return &nso
	}
	offload := func(ctx context.Context, ns string, spec ferryv1alpha1.NamespaceOffloadingSpec) {
		GinkgoHelper()
		Expect(consumer.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns}, Spec: spec})).To(Succeed())
	}
	// twinsOn lists the TwinNamespaces this consumer asked a provider for
	// on behalf of ns.
	twinsOn := func(ctx context.Context, g Gomega, id ferryv1alpha1.ClusterID, ns string) []string {
		var list ferryv1alpha1.TwinNamespaceList
		g.Expect(providers[id].Client.List(ctx, &list, client.InNamespace(tenant), client.MatchingLabels{
			ferryv1alpha1.LabelOriginCluster: string(home), ferryv1alpha1.LabelOriginNamespace: ns})).To(Succeed())
		var names []string
		for _, tw := range list.Items {
			names = append(names, tw.Name)
		}
		return names
	}
	namespaceExists := func(ctx context.Context, g Gomega, c *testbed.Cluster, name string) bool {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		return err == nil
	}
	offloadingLabel := func(ctx context.Context, g Gomega, ns string) map[string]string {
		var n corev1.Namespace
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		return n.Labels
	}
	// expectOffloaded waits until ns is Ready with exactly the twins given
	// (cluster -> twin namespace), each Ready and existing on its provider.
	expectOffloaded := func(ctx context.Context, ns string, twins map[ferryv1alpha1.ClusterID]string) *ferryv1alpha1.NamespaceOffloading {
		GinkgoHelper()
		var nso *ferryv1alpha1.NamespaceOffloading
		Eventually(func(g Gomega) {
			nso = offloadingOf(ctx, g, ns)
			g.Expect(nso.Status.ObservedGeneration).To(Equal(nso.Generation))
			g.Expect(meta.IsStatusConditionTrue(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)).To(BeTrue(), "Ready: %+v", nso.Status.Conditions)
			g.Expect(nso.Status.Clusters).To(HaveLen(len(twins)))
			for _, c := range nso.Status.Clusters {
				g.Expect(twins).To(HaveKeyWithValue(c.ClusterID, c.TwinNamespace))
				g.Expect(c.Phase).To(Equal(ferryv1alpha1.OffloadingReady))
				g.Expect(meta.IsStatusConditionTrue(c.Conditions, ferryv1alpha1.ConditionReady)).To(BeTrue())
			}
			for id, twin := range twins {
				g.Expect(twinsOn(ctx, g, id, ns)).To(ConsistOf(twin))
				g.Expect(namespaceExists(ctx, g, providers[id], twin)).To(BeTrue(), "twin namespace %s in %s", twin, id)
			}
			g.Expect(offloadingLabel(ctx, g, ns)).To(HaveKeyWithValue(ferryv1alpha1.LabelOffloadingEnabled, "true"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		return nso
	}
	// expectUnoffloaded waits until ns has no NamespaceOffloading, no label
	// and no twin anywhere.
	expectUnoffloaded := func(ctx context.Context, ns string, twins ...string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &ferryv1alpha1.NamespaceOffloading{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "NamespaceOffloading still there: %v", err)
			g.Expect(offloadingLabel(ctx, g, ns)).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled))
			for id, p := range providers {
				g.Expect(twinsOn(ctx, g, id, ns)).To(BeEmpty(), "TwinNamespaces left in %s", id)
				for _, twin := range twins {
					g.Expect(namespaceExists(ctx, g, p, twin)).To(BeFalse(), "twin namespace %s left in %s", twin, id)
				}
			}
		}).WithContext(ctx).WithTimeout(45 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	}
	expectRefused := func(ctx context.Context, ns, reason, message string) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(reason))
			g.Expect(ready.Message).To(ContainSubstring(message))
			g.Expect(nso.Finalizers).To(BeEmpty())
			g.Expect(nso.Status.Clusters).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(offloadingLabel(ctx, Default, ns)).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled))
		for id := range providers {
			Expect(twinsOn(ctx, Default, id, ns)).To(BeEmpty())
		}
	}

	BeforeAll(func(ctx context.Context) {
		nodes := func(region string) []testbed.NodePool {
			return []testbed.NodePool{{Name: "worker", Count: 1, CPU: "8", Memory: "32Gi", Labels: map[string]string{corev1.LabelTopologyRegion: region}}}
		}
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "home", ControllerManager: true},
			testbed.Options{Name: "eu", ControllerManager: true, Nodes: nodes("eu-west")},
			testbed.Options{Name: "us", ControllerManager: true, Nodes: nodes("us-east")},
		)
		consumer, providers[eu], providers[us] = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		health := vknode.Options{HealthCheckPeriod: time.Second, HealthCheckTimeout: 800 * time.Millisecond, FailureThreshold: 3}
		framework.StartFerry(ctx, consumer, home, framework.FerryOptions{Health: health})
		framework.StartFerry(ctx, providers[eu], eu, framework.FerryOptions{Health: health, ClusterLabels: map[string]string{tier: "gold"}})
		framework.StartFerry(ctx, providers[us], us, framework.FerryOptions{Health: health, ClusterLabels: map[string]string{tier: "silver"}})
		for _, id := range []ferryv1alpha1.ClusterID{eu, us} {
			out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", providers[id].KubeconfigPath, "--timeout", "90s")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		var node corev1.Node
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: peering.VirtualNodeName(eu)}, &node)).To(Succeed())
		Expect(node.Labels).To(HaveKeyWithValue(tier, "gold"), "the provider's cluster label reaches its virtual node")
	})

	It("offloads to every provider under DefaultName, and on unoffload drains the pods before it removes the twins", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "shop")
		twin := nsoffloading.DefaultTwinNamespaceName(ns, home)
		Expect(twin).To(Equal(ns + "-home"))
		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{})
		nso := expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: twin, us: twin})
		Expect(nso.Finalizers).To(ContainElement(ferryv1alpha1.NamespaceOffloadingFinalizer))
		Expect(meta.IsStatusConditionTrue(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected)).To(BeTrue())
		Expect(meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady).Message).To(ContainSubstring("pods: LocalAndRemote"),
			"the pod offloading strategy is shown")

		By("binding a pod to eu's virtual node; a finalizer of the test's holds it after the virtual kubelet lets it go")
		const hold = "e2e.ferry.io/hold"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns, Finalizers: []string{hold}},
			Spec: corev1.PodSpec{NodeName: peering.VirtualNodeName(eu),
				Tolerations: []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
		}
		// Until the namespace's default service account exists, pods are refused.
		Eventually(func() error { return consumer.Client.Create(ctx, pod) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		Expect(consumer.Client.Delete(ctx, nso)).To(Succeed())
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			g.Expect(nso.Status.Clusters).To(ContainElement(And(HaveField("ClusterID", eu), HaveField("Phase", ferryv1alpha1.OffloadingTerminating),
				HaveField("Conditions", ContainElement(HaveField("Reason", nsoffloading.ReasonDraining))))))
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.DeletionTimestamp).NotTo(BeNil(), "the pod is drained")
			g.Expect(offloadingLabel(ctx, g, ns)).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled), "new pods stay local from the start")
		}).WithContext(ctx).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(twinsOn(ctx, g, eu, ns)).To(ConsistOf(twin))
		}).WithContext(ctx).WithTimeout(2*time.Second).Should(Succeed(), "the twin stays while a pod is still there")

		patch := client.MergeFrom(pod.DeepCopy())
		controllerutil.RemoveFinalizer(pod, hold)
		Expect(consumer.Client.Patch(ctx, pod, patch)).To(Succeed())
		expectUnoffloaded(ctx, ns, twin)
	})

	It("picks providers with the clusterSelector and follows its changes, draining the one no longer picked", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "picky")
		twin := nsoffloading.DefaultTwinNamespaceName(ns, home)
		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{ClusterSelector: gold})
		nso := expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: twin})
		Expect(meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected).Message).To(Equal("eu"))
		Expect(twinsOn(ctx, Default, us, ns)).To(BeEmpty())

		By("moving to the silver tier")
		nso.Spec.ClusterSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"silver"}
		Expect(consumer.Client.Update(ctx, nso)).To(Succeed())
		expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{us: twin})
		Eventually(func(g Gomega) {
			g.Expect(twinsOn(ctx, g, eu, ns)).To(BeEmpty())
			g.Expect(namespaceExists(ctx, g, providers[eu], twin)).To(BeFalse())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("selecting nothing")
		nso = offloadingOf(ctx, Default, ns)
		nso.Spec.ClusterSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"platinum"}
		Expect(consumer.Client.Update(ctx, nso)).To(Succeed())
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			selected := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected)
			g.Expect(selected).NotTo(BeNil())
			g.Expect(selected.Reason).To(Equal(nsoffloading.ReasonNoClusterSelected))
			g.Expect(nso.Status.Clusters).To(BeEmpty())
			g.Expect(twinsOn(ctx, g, us, ns)).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, nso)).To(Succeed())
		expectUnoffloaded(ctx, ns, twin)
	})

	It("uses the namespace's own name under EnforceSameName", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "same")
		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName, ClusterSelector: gold})
		nso := expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: ns})
		Expect(consumer.Client.Delete(ctx, nso)).To(Succeed())
		expectUnoffloaded(ctx, ns, ns)
	})

	It("fails clearly under EnforceSameName when the provider has that namespace already, and leaves it alone", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "taken")
		theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"owner": "someone-else"}}}
		Expect(providers[eu].Client.Create(ctx, theirs)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(providers[eu].Client.Delete(ctx, theirs)).To(Succeed()) })
		Expect(providers[eu].Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious", Namespace: ns}})).To(Succeed())

		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName, ClusterSelector: gold})
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			g.Expect(nso.Status.Clusters).To(ConsistOf(And(HaveField("ClusterID", eu), HaveField("TwinNamespace", ns), HaveField("Phase", ferryv1alpha1.OffloadingFailed))))
			ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(nsoffloading.ReasonNamespaceConflict))
			g.Expect(ready.Message).To(ContainSubstring("eu (Failed, NamespaceConflict"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		Expect(consumer.Client.Delete(ctx, offloadingOf(ctx, Default, ns))).To(Succeed())
		expectUnoffloaded(ctx, ns)
		var after corev1.Namespace
		Expect(providers[eu].Client.Get(ctx, client.ObjectKey{Name: ns}, &after)).To(Succeed())
		Expect(after.DeletionTimestamp).To(BeNil(), "the provider's own namespace is not deleted")
		Expect(after.Labels).To(Equal(map[string]string{"owner": "someone-else", corev1.LabelMetadataName: ns}), "nor relabelled")
		Expect(providers[eu].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "precious"}, &corev1.ConfigMap{})).To(Succeed())
	})

	It("leaves a namespace whose twin name is taken as it was, tells its pods why, and proceeds once the name is free", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "conflict")
		theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"owner": "someone-else"}}}
		Expect(providers[eu].Client.Create(ctx, theirs)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(providers[eu].Client.Delete(ctx, theirs))).To(Succeed())
		})

		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName, ClusterSelector: gold})
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			g.Expect(nso.Status.Clusters).To(ConsistOf(And(HaveField("ClusterID", eu), HaveField("Phase", ferryv1alpha1.OffloadingFailed))))
			ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(nsoffloading.ReasonNamespaceConflict))
			g.Expect(offloadingLabel(ctx, g, ns)).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled),
				"a namespace no provider gives a twin to is left unlabelled: the webhooks send no new pod to a virtual node")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(offloadingLabel(ctx, g, ns)).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled))
		}).WithContext(ctx).WithTimeout(3*time.Second).Should(Succeed(), "the label does not come back while the conflict lasts")

		By("a pod bound to eu's virtual node anyway is told the real reason")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: ns},
			Spec: corev1.PodSpec{NodeName: peering.VirtualNodeName(eu),
				Tolerations: []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
		}
		Eventually(func() error { return consumer.Client.Create(ctx, pod) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodConditionType(ferryv1alpha1.PodConditionOffloaded)), HaveField("Status", corev1.ConditionFalse),
				HaveField("Message", And(
					ContainSubstring("NamespaceOffloading "+ns+"/"+ferryv1alpha1.NamespaceOffloadingName),
					ContainSubstring("cluster eu refused twin namespace "+ns),
					ContainSubstring("(NamespaceConflict)"),
					Not(ContainSubstring("offload it with a NamespaceOffloading")))))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("removing the provider's namespace: the offloading proceeds by itself")
		Expect(providers[eu].Client.Delete(ctx, theirs)).To(Succeed())
		// A refused twin is asked about again every 10 poll intervals (30 s).
		Eventually(func(g Gomega) {
			g.Expect(meta.IsStatusConditionTrue(offloadingOf(ctx, g, ns).Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)).To(BeTrue())
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: ns})
		Eventually(func(g Gomega) {
			var shadow ferryv1alpha1.ShadowPod
			g.Expect(providers[eu].Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod.Name}, &shadow)).To(Succeed(), "the waiting pod is offloaded")
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		Expect(consumer.Client.Delete(ctx, offloadingOf(ctx, Default, ns))).To(Succeed())
		expectUnoffloaded(ctx, ns, ns)
	})

	It("uses spec.remoteNamespaceName under SelectedName, and reports a later strategy change instead of making a second twin", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "chosen")
		chosen := "picked-" + ns
		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingSelectedName, RemoteNamespaceName: chosen})
		nso := expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: chosen, us: chosen})

		nso.Spec.NamespaceMappingStrategy, nso.Spec.RemoteNamespaceName = ferryv1alpha1.NamespaceMappingDefaultName, ""
		Expect(consumer.Client.Update(ctx, nso)).To(Succeed())
		Eventually(func(g Gomega) {
			nso := offloadingOf(ctx, g, ns)
			g.Expect(nso.Status.ObservedGeneration).To(Equal(nso.Generation))
			ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(nsoffloading.ReasonNamespaceMappingChanged))
			g.Expect(ready.Message).To(ContainSubstring("now names them " + nsoffloading.DefaultTwinNamespaceName(ns, home)))
		}).WithContext(ctx).WithTimeout(20 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(twinsOn(ctx, g, eu, ns)).To(ConsistOf(chosen))
			g.Expect(twinsOn(ctx, g, us, ns)).To(ConsistOf(chosen))
		}).WithContext(ctx).WithTimeout(2 * time.Second).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, nso)).To(Succeed())
		expectUnoffloaded(ctx, ns, chosen)
	})

	It("refuses kube-system, naming it, and makes nothing", func(ctx context.Context) {
		offload(ctx, metav1.NamespaceSystem, ferryv1alpha1.NamespaceOffloadingSpec{})
		DeferCleanup(func(ctx context.Context) {
			Expect(consumer.Client.Delete(ctx, &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{
				Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: metav1.NamespaceSystem}})).To(Succeed())
		})
		expectRefused(ctx, metav1.NamespaceSystem, nsoffloading.ReasonForbiddenNamespace, "namespace kube-system may not be offloaded")
	})

	It("refuses an invalid clusterSelector, naming the field", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "invalid")
		offload(ctx, ns, ferryv1alpha1.NamespaceOffloadingSpec{ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: tier, Operator: corev1.NodeSelectorOpIn}}}}}})
		expectRefused(ctx, ns, nsoffloading.ReasonInvalidClusterSelector, "spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values")
	})

	It("offloads and unoffloads with ferryctl, idempotently, and refuses bad flags by name", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "cli")
		twin := nsoffloading.DefaultTwinNamespaceName(ns, home)
		kc := []string{"--kubeconfig", consumer.KubeconfigPath}
		out, err := ferryctl(ctx, append([]string{"offload", "namespace", ns, "--cluster-selector", tier + " in (gold,silver)", "--pod-offloading-strategy", "Remote", "--wait", "--timeout", "30s"}, kc...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`eu\s+` + twin + `\s+Ready`))
		Expect(out).To(MatchRegexp(`us\s+` + twin + `\s+Ready`))
		nso := expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: twin, us: twin})
		Expect(nso.Spec.PodOffloadingStrategy).To(Equal(ferryv1alpha1.PodOffloadingRemote))

		By("running it again unchanged, then narrowed to gold")
		out, err = ferryctl(ctx, append([]string{"offload", "namespace", ns, "--cluster-selector", tier + " in (gold,silver)", "--pod-offloading-strategy", "Remote"}, kc...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("already offloaded"))
		out, err = ferryctl(ctx, append([]string{"offload", "namespace", ns, "--cluster-selector", tier + "=gold", "--pod-offloading-strategy", "Remote", "--wait", "--timeout", "30s"}, kc...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		expectOffloaded(ctx, ns, map[ferryv1alpha1.ClusterID]string{eu: twin})

		By("refusing bad input")
		for want, args := range map[string][]string{
			`--pod-offloading-strategy "Sometimes": must be one of Local, Remote, LocalAndRemote`: {"offload", "namespace", ns, "--pod-offloading-strategy", "Sometimes"},
			`--cluster-selector "tier in (a"`:            {"offload", "namespace", ns, "--cluster-selector", "tier in (a"},
			"namespace kube-system may not be offloaded": {"offload", "namespace", "kube-system"},
		} {
			out, err := ferryctl(ctx, append(args, kc...)...)
			Expect(err).To(MatchError(ContainSubstring(want)), out)
		}

		out, err = ferryctl(ctx, append([]string{"unoffload", "namespace", ns, "--wait", "--timeout", "45s"}, kc...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Namespace " + ns + " is unoffloaded."))
		expectUnoffloaded(ctx, ns, twin)
		out, err = ferryctl(ctx, append([]string{"unoffload", "namespace", ns}, kc...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("is not offloaded"))
	})
})
