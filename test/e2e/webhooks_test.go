package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
	"github.com/ferry-io/ferry/webhooks"
)

// plainDeployment is what a user writes: no toleration, no affinity.
func plainDeployment(namespace, name string, replicas int32) *appsv1.Deployment {
	return deployment(namespace, name, replicas, corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}})
}

func cpuShadowPod(namespace, name string, consumer ferryv1alpha1.ClusterID, cpu string) *ferryv1alpha1.ShadowPod {
	return &ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: string(consumer)}},
		Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: consumer, Template: ferryv1alpha1.ShadowPodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		}},
	}
}

var _ = Describe("Admission webhooks", Label("webhooks"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	virtualNode := peering.VirtualNodeName("provider")

	// offload creates a NamespaceOffloading and waits until the namespace is
	// labelled for the webhooks and its twin is Ready.
	offload := func(ctx context.Context, prefix string, spec ferryv1alpha1.NamespaceOffloadingSpec) (ns, twin string) {
		GinkgoHelper()
		ns = framework.CreateNamespace(ctx, consumer, prefix)
		Expect(consumer.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns}, Spec: spec})).To(Succeed())
		Eventually(func(g Gomega) {
			var n corev1.Namespace
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
			g.Expect(n.Labels).To(HaveKeyWithValue(ferryv1alpha1.LabelOffloadingEnabled, "true"))
			var nso ferryv1alpha1.NamespaceOffloading
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
			g.Expect(nso.Status.Clusters).To(ConsistOf(HaveField("Phase", ferryv1alpha1.OffloadingReady)))
			twin = nso.Status.Clusters[0].TwinNamespace
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		return ns, twin
	}
	podsOf := func(ctx context.Context, g Gomega, ns, app string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		return pods.Items
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 2}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true,
				Nodes: []testbed.NodePool{{Name: "worker", Count: 2, CPU: "32", Memory: "128Gi", Pods: 250}}},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
			framework.StartWebhookInProcess(ctx, c)
		}
		// As their own service accounts: these specs also prove the
		// generated roles are enough (and the security specs, not more).
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{AsServiceAccounts: true})
		framework.StartFerry(ctx, provider, "provider", framework.FerryOptions{AsServiceAccounts: true})
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s")
		Expect(err).NotTo(HaveOccurred(), out)
	})

	It("injects its CA bundle into every webhook, and again after the configurations are re-applied", func(ctx context.Context) {
		expectInjected := func() {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				var m admissionregistrationv1.MutatingWebhookConfiguration
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: webhooks.ConfigurationName}, &m)).To(Succeed())
				for _, w := range m.Webhooks {
					g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), "webhook %s", w.Name)
				}
				var v admissionregistrationv1.ValidatingWebhookConfiguration
				g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: webhooks.ConfigurationName}, &v)).To(Succeed())
				for _, w := range v.Webhooks {
					g.Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), "webhook %s", w.Name)
				}
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		expectInjected()
		var secret corev1.Secret
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-webhook-certs"}, &secret)).To(Succeed())
		Expect(secret.Data).To(HaveKey("tls.crt"))

		By("re-applying the configurations without a CA bundle")
		var m admissionregistrationv1.MutatingWebhookConfiguration
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: webhooks.ConfigurationName}, &m)).To(Succeed())
		for i := range m.Webhooks {
			m.Webhooks[i].ClientConfig.CABundle = nil
		}
		Expect(consumer.Client.Update(ctx, &m)).To(Succeed())
		expectInjected()
	})

	It("lands a plain Deployment of a Remote namespace entirely on the virtual node, and of a Local namespace on none", func(ctx context.Context) {
		remote, _ := offload(ctx, "remote", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		local, _ := offload(ctx, "local", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocal})
		Expect(consumer.Client.Create(ctx, plainDeployment(remote, "api", 6))).To(Succeed())
		Expect(consumer.Client.Create(ctx, plainDeployment(local, "web", 4))).To(Succeed())
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, remote, "api")
			g.Expect(pods).To(HaveLen(6))
			for _, p := range pods {
				g.Expect(p.Spec.NodeName).To(Equal(virtualNode), "pod %s", p.Name)
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
				g.Expect(p.Annotations).To(HaveKeyWithValue(webhooks.AnnotationAppliedPolicy, "strategy=Remote; added toleration, nodeAffinity"))
			}
			pods = podsOf(ctx, g, local, "web")
			g.Expect(pods).To(HaveLen(4))
			for _, p := range pods {
				g.Expect(p.Spec.NodeName).To(HavePrefix("local-"), "pod %s", p.Name)
				g.Expect(p.Spec.Tolerations).NotTo(ContainElement(HaveField("Key", ferryv1alpha1.TaintVirtualNode)))
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

		By("letting a pod narrow a LocalAndRemote namespace, never widen a Local one")
		both, _ := offload(ctx, "both", ferryv1alpha1.NamespaceOffloadingSpec{SchedulerName: "ferry-scheduler"})
		for _, strategy := range []string{"Local", "Remote"} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(strategy), Namespace: both, Labels: map[string]string{"app": "pinned"},
				Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: strategy}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
			Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
			if strategy == "Local" {
				Expect(pod.Spec.SchedulerName).To(Equal(corev1.DefaultSchedulerName), "a Local pod is left to its scheduler")
			} else {
				Expect(pod.Spec.SchedulerName).To(Equal("ferry-scheduler"))
			}
		}
		widening := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "widening", Namespace: local,
			Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
		err := consumer.Client.Create(ctx, widening)
		Expect(err).To(MatchError(ContainSubstring("metadata.annotations[ferry.io/pod-offloading-strategy]")))
		Expect(err).To(MatchError(ContainSubstring("accepted: Local")))
		Eventually(func(g Gomega) {
			var pod corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: both, Name: "local"}, &pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(HavePrefix("local-"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("admits with a warning a pod whose ferry.io placement annotation has no effect, and calls no webhook for ordinary pods of namespaces not offloaded", func(ctx context.Context) {
		warned := &warningRecorder{}
		cfg := rest.CopyConfig(consumer.Config)
		cfg.WarningHandlerWithContext = warned
		kc, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		// warnCalls is how often the API server has called the warning
		// webhook (its own metric, so a call a matchCondition spared is seen
		// not to happen).
		warnCalls := func(g Gomega) int {
			raw, err := kubernetes.NewForConfigOrDie(consumer.Config).RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			n := 0
			for _, line := range strings.Split(string(raw), "\n") {
				if strings.HasPrefix(line, "apiserver_admission_webhook_request_total{") && strings.Contains(line, `name="pods.warn.ferry.io"`) {
					var v float64
					_, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
					g.Expect(err).NotTo(HaveOccurred(), line)
					n += int(v)
				}
			}
			return n
		}
		podIn := func(ns, name string, annotations map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
		}
		plain := framework.CreateNamespace(ctx, consumer, "plain")
		before := warnCalls(Default)
		// Until the namespace's default service account exists, pods are refused.
		Eventually(func() error { return kc.Create(ctx, podIn(plain, "ordinary", map[string]string{"team": "shop"})) }).
			WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(warned.take()).To(BeEmpty())
		Expect(warnCalls(Default)).To(Equal(before), "an ordinary pod of a namespace not offloaded calls no ferry webhook")

		remote := podIn(plain, "wants-remote", map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"})
		Expect(kc.Create(ctx, remote)).To(Succeed(), "admitted: only a warning is at stake")
		Expect(remote.Spec.Tolerations).NotTo(ContainElement(HaveField("Key", ferryv1alpha1.TaintVirtualNode)))
		Expect(warned.take()).To(ConsistOf(And(
			ContainSubstring(`metadata.annotations[ferry.io/pod-offloading-strategy]: "Remote" has no effect`),
			ContainSubstring("namespace "+plain+" is not offloaded (it has no NamespaceOffloading)"))))
		Expect(warnCalls(Default)).To(Equal(before + 1))

		By("warning, in an offloaded namespace, about a strategy annotation that narrows nothing")
		ns, _ := offload(ctx, "same", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		Expect(kc.Create(ctx, podIn(ns, "redundant", map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}))).To(Succeed())
		Expect(warned.take()).To(ConsistOf(ContainSubstring("it is namespace " + ns + "'s podOffloadingStrategy already")))
	})

	It("remaps PVCs to the virtual storage class once it is installed and validates ferry.io annotations", func(ctx context.Context) {
		ns, _ := offload(ctx, "data", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote})
		pvc := func(name string, class *string, annotations map[string]string) *corev1.PersistentVolumeClaim {
			return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		}
		standard := "standard"
		early := pvc("early", &standard, nil)
		Expect(consumer.Client.Create(ctx, early)).To(Succeed())
		Expect(early.Spec.StorageClassName).To(HaveValue(Equal("standard")), "no virtual storage class installed: left alone")

		class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.StorageClassVirtual}, Provisioner: "ferry.io/virtual",
			VolumeBindingMode: new(storagev1.VolumeBindingWaitForFirstConsumer)}
		Expect(consumer.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, class))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			data := pvc("data-"+time.Now().Format("150405.000000")[7:], &standard, map[string]string{placement.AnnotationDataGravity: "true"})
			g.Expect(consumer.Client.Create(ctx, data)).To(Succeed())
			g.Expect(data.Spec.StorageClassName).To(HaveValue(Equal(ferryv1alpha1.StorageClassVirtual)))
			g.Expect(data.Annotations).To(HaveKeyWithValue(ferryv1alpha1.AnnotationRequestedStorageClass, "standard"))
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the webhook's cache sees the new class")
		defaulted := pvc("defaulted", nil, nil)
		Expect(consumer.Client.Create(ctx, defaulted)).To(Succeed())
		Expect(defaulted.Spec.StorageClassName).To(HaveValue(Equal(ferryv1alpha1.StorageClassVirtual)))
		Expect(defaulted.Annotations).To(HaveKeyWithValue(ferryv1alpha1.AnnotationRequestedStorageClass, ""))
		static := pvc("static", new(""), nil)
		Expect(consumer.Client.Create(ctx, static)).To(Succeed())
		Expect(static.Spec.StorageClassName).To(HaveValue(Equal("")), "a claim asking for no class binds statically")

		By("refusing malformed and unknown ferry.io annotations, naming the field and the accepted values")
		err := consumer.Client.Create(ctx, pvc("bad", nil, map[string]string{placement.AnnotationDataGravity: "yes"}))
		Expect(err).To(MatchError(And(ContainSubstring("metadata.annotations[ferry.io/data-gravity]"), ContainSubstring(`"true"`), ContainSubstring(`"false"`))))
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "typo", Namespace: ns, Annotations: map[string]string{"ferry.io/pod-offloading-stragety": "Local"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
		err = consumer.Client.Create(ctx, pod)
		Expect(err).To(MatchError(And(ContainSubstring("metadata.annotations[ferry.io/pod-offloading-stragety]"), ContainSubstring(placement.AnnotationPodOffloadingStrategy))))

		By("keeping a pod's strategy immutable")
		pod.Annotations = map[string]string{placement.AnnotationPodOffloadingStrategy: "Local"}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		patched := pod.DeepCopy()
		patched.Annotations[placement.AnnotationPodOffloadingStrategy] = "Remote"
		Expect(consumer.Client.Patch(ctx, patched, client.MergeFrom(pod))).To(MatchError(And(
			ContainSubstring("metadata.annotations[ferry.io/pod-offloading-strategy]"), ContainSubstring("immutable"))))
	})

	It("validates NamespaceOffloadings: selector, reserved namespaces, mapping immutable once twins exist", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "nso")
		bad := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
			Spec: ferryv1alpha1.NamespaceOffloadingSpec{ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cpus", Operator: corev1.NodeSelectorOpGt, Values: []string{"many"}}}},
				{},
			}}}}
		err := consumer.Client.Create(ctx, bad)
		Expect(err).To(MatchError(And(
			ContainSubstring("spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]"),
			ContainSubstring("spec.clusterSelector.nodeSelectorTerms[1]"))))
		reserved := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: "kube-public"}}
		Expect(consumer.Client.Create(ctx, reserved)).To(MatchError(ContainSubstring("kube-public is reserved")))

		ns, _ = offload(ctx, "mapped", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		var nso ferryv1alpha1.NamespaceOffloading
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		nso.Spec.NamespaceMappingStrategy = ferryv1alpha1.NamespaceMappingEnforceSameName
		Expect(consumer.Client.Update(ctx, &nso)).To(MatchError(And(ContainSubstring("spec.namespaceMappingStrategy"), ContainSubstring("unoffload the namespace first"))))
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
		nso.Spec.PodOffloadingStrategy = ferryv1alpha1.PodOffloadingLocalAndRemote
		Expect(consumer.Client.Update(ctx, &nso)).To(Succeed(), "the pod strategy may change: it applies to new pods")
	})

	It("lets the consumer's credential do on the provider exactly what the README says: every resource and verb, in every kind of namespace", Label("security"), func(ctx context.Context) {
		_, twin := offload(ctx, "matrix", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		tenant := peering.TenantNamespace("consumer")
		full := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
		read := []string{"get", "list", "watch"}
		// What the README grants: the tenant Role (asking for resources and
		// twin namespaces, exchanging NetworkConfigs, renewing its token),
		// ferry-twin-namespace in twin namespaces, and what every
		// authenticated user may (self reviews).
		type rule struct {
			group, resource string
			verbs           []string
		}
		inTenant := []rule{
			{"ferry.io", "resourceslices", full}, {"ferry.io", "resourceslices/status", []string{"get"}},
			{"ferry.io", "twinnamespaces", full}, {"ferry.io", "twinnamespaces/status", []string{"get"}},
			{"ferry.io", "networkconfigs", []string{"get", "list", "watch", "create"}},
		}
		inTwin := []rule{
			{"ferry.io", "shadowpods", full}, {"ferry.io", "shadowpods/status", []string{"get"}},
			{"", "pods", []string{"get", "list", "watch", "delete"}}, {"", "events", read},
			{"", "configmaps", full}, {"", "secrets", full}, {"", "services", full}, {"", "serviceaccounts", full}, {"", "persistentvolumeclaims", full},
			{"discovery.k8s.io", "endpointslices", full}, {"networking.k8s.io", "ingresses", full}, {"networking.k8s.io", "networkpolicies", full},
			{"", "pods/log", []string{"get"}},
			{"", "pods/exec", []string{"get", "create"}}, {"", "pods/attach", []string{"get", "create"}}, {"", "pods/portforward", []string{"get", "create"}},
			{"metrics.k8s.io", "pods", []string{"get", "list"}},
		}
		everywhere := []rule{
			{"authorization.k8s.io", "selfsubjectaccessreviews", []string{"create"}},
			{"authorization.k8s.io", "selfsubjectrulesreviews", []string{"create"}},
			{"authentication.k8s.io", "selfsubjectreviews", []string{"create"}},
		}
		granted := func(rules []rule, group, resource, verb string) bool {
			for _, r := range rules {
				if r.group == group && r.resource == resource && slices.Contains(r.verbs, verb) {
					return true
				}
			}
			return false
		}
		want := func(ns, group, resource, verb string) bool {
			switch {
			case granted(everywhere, group, resource, verb):
				return true
			case ns == tenant:
				return granted(inTenant, group, resource, verb)
			case ns == twin:
				return granted(inTwin, group, resource, verb)
			}
			return false
		}

		lists, err := provider.Kube.Discovery().ServerPreferredResources()
		Expect(err).NotTo(HaveOccurred())
		type check struct{ ns, group, resource, verb string }
		var checks []check
		for _, list := range lists {
			gv, err := schema.ParseGroupVersion(list.GroupVersion)
			Expect(err).NotTo(HaveOccurred())
			for _, r := range list.APIResources {
				namespaces := []string{""}
				if r.Namespaced {
					namespaces = []string{tenant, twin, metav1.NamespaceDefault, metav1.NamespaceSystem, ferryv1alpha1.SystemNamespace}
				}
				verbs := append([]string(r.Verbs), "deletecollection")
				for _, ns := range namespaces {
					for _, verb := range slices.Compact(slices.Sorted(slices.Values(verbs))) {
						checks = append(checks, check{ns, gv.Group, r.Name, verb})
					}
				}
			}
		}
		// Subresources the consumer uses (discovery lists top-level
		// resources only).
		for _, ns := range []string{tenant, twin, metav1.NamespaceDefault} {
			for _, sub := range []check{{"", "", "pods/log", "get"}, {"", "", "pods/exec", "create"}, {"", "", "pods/attach", "create"}, {"", "", "pods/portforward", "create"},
				{"", "", "pods/status", "update"}, {"", "", "pods/eviction", "create"}, {"", "", "serviceaccounts/token", "create"},
				{"", "ferry.io", "shadowpods/status", "update"}, {"", "ferry.io", "resourceslices/status", "update"}} {
				sub.ns = ns
				checks = append(checks, sub)
			}
		}
		user := "system:serviceaccount:" + tenant + ":" + ferryv1alpha1.ConsumerServiceAccount
		groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + tenant, "system:authenticated"}
		var mu sync.Mutex
		var wrong []string
		var wg sync.WaitGroup
		work := make(chan check)
		for range 8 {
			wg.Go(func() {
				for c := range work {
					resource, sub, _ := strings.Cut(c.resource, "/")
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: c.group, Resource: resource, Subresource: sub}}}
					got, err := provider.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
					mu.Lock()
					switch {
					case err != nil:
						wrong = append(wrong, fmt.Sprintf("%+v: %v", c, err))
					case got.Status.Allowed != want(c.ns, c.group, c.resource, c.verb):
						wrong = append(wrong, fmt.Sprintf("%s %s.%s in %q: allowed=%v", c.verb, c.resource, c.group, c.ns, got.Status.Allowed))
					}
					mu.Unlock()
				}
			})
		}
		for _, c := range checks {
			work <- c
		}
		close(work)
		wg.Wait()
		// Its fencing Lease, by name (a rule with resourceNames allows no
		// nameless request, which the walk above checked): get and update in
		// the tenant namespace, nothing else, nowhere else.
		leaseChecks := 0
		for _, ns := range []string{tenant, twin, metav1.NamespaceDefault, "kube-node-lease"} {
			for _, name := range []string{ferryv1alpha1.ConsumerLeaseName, "other"} {
				for _, verb := range []string{"get", "update", "patch", "delete", "watch"} {
					allowed := ns == tenant && name == ferryv1alpha1.ConsumerLeaseName && (verb == "get" || verb == "update")
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: name}}}
					got, err := provider.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
					Expect(err).NotTo(HaveOccurred())
					if got.Status.Allowed != allowed {
						wrong = append(wrong, fmt.Sprintf("%s leases.coordination.k8s.io %q in %q: allowed=%v", verb, name, ns, got.Status.Allowed))
					}
					leaseChecks++
				}
			}
		}
		AddReportEntry("consumer credential checks", len(checks)+leaseChecks)
		Expect(wrong).To(BeEmpty(), "the consumer's credential differs from the README in %d of %d checks", len(wrong), len(checks)+leaseChecks)

		By("named rights: only its own NetworkConfig and its own token")
		for _, c := range []struct {
			verb, resource, sub, name string
			allowed                   bool
		}{
			{"update", "networkconfigs", "", "consumer", true}, {"update", "networkconfigs", "", "provider", false},
			{"patch", "networkconfigs", "status", "consumer", true}, {"patch", "networkconfigs", "status", "provider", false},
			{"delete", "networkconfigs", "", "consumer", true}, {"delete", "networkconfigs", "", "provider", false},
			{"create", "serviceaccounts", "token", ferryv1alpha1.ConsumerServiceAccount, true}, {"create", "serviceaccounts", "token", "default", false},
		} {
			group := "ferry.io"
			if c.resource == "serviceaccounts" {
				group = ""
			}
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tenant, Verb: c.verb, Group: group, Resource: c.resource, Subresource: c.sub, Name: c.name}}}
			got, err := provider.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Status.Allowed).To(Equal(c.allowed), "%s %s/%s %s in the tenant namespace", c.verb, c.resource, c.sub, c.name)
		}
	})

	It("holds a consumer's pods to its Pod Security level on the provider: baseline by default, restricted or privileged when the provider's admin says so", Label("security"), func(ctx context.Context) {
		ns, twin := offload(ctx, "secure", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		setLevel := func(ctx context.Context, level ferryv1alpha1.PodSecurityLevel) {
			GinkgoHelper()
			var fcs ferryv1alpha1.ForeignClusterList
			Expect(provider.Client.List(ctx, &fcs)).To(Succeed())
			for i := range fcs.Items {
				if fc := &fcs.Items[i]; fc.Spec.ClusterID == "consumer" {
					patch := client.MergeFrom(fc.DeepCopy())
					fc.Spec.PodSecurity = level
					Expect(provider.Client.Patch(ctx, fc, patch)).To(Succeed())
				}
			}
			Eventually(func(g Gomega) {
				var n corev1.Namespace
				g.Expect(provider.Client.Get(ctx, client.ObjectKey{Name: twin}, &n)).To(Succeed())
				g.Expect(n.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", string(level)))
				g.Expect(n.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce-version", "latest"))
			}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "the twin namespace enforces %s", level)
		}
		DeferCleanup(func(ctx context.Context) { setLevel(ctx, ferryv1alpha1.PodSecurityBaseline) })
		pod := func(name string, edit func(*corev1.PodSpec)) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}
			edit(&p.Spec)
			Expect(consumer.Client.Create(ctx, p)).To(Succeed())
			return p
		}
		privileged := func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		restricted := func(s *corev1.PodSpec) {
			s.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			s.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}
		plain := func(*corev1.PodSpec) {}
		expectRefused := func(p *corev1.Pod, want ...string) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				c := podCondition(p, ferryv1alpha1.PodConditionOffloaded)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(offloading.ReasonOffloadingRefused))
				for _, w := range want {
					g.Expect(c.Message).To(ContainSubstring(w))
				}
				// Refused for good, as a hostNetwork pod is: Failed, not Pending forever.
				g.Expect(p.Status.Phase).To(Equal(corev1.PodFailed))
				g.Expect(p.Status.Reason).To(Equal(offloading.ReasonOffloadingRefused))
				var events corev1.EventList
				g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", p.Name), HaveField("Reason", offloading.ReasonOffloadingRefused),
					HaveField("Message", ContainSubstring(want[0])))))
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		expectRunning := func(p *corev1.Pod) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
				g.Expect(p.Spec.NodeName).To(Equal(virtualNode))
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		}

		By("baseline by default: the twin namespace enforces it, a privileged pod is refused naming the field, a plain one runs")
		setLevel(ctx, ferryv1alpha1.PodSecurityBaseline)
		expectRefused(pod("privileged", privileged), `violates PodSecurity "baseline:latest"`, `privileged (container "app" must not set securityContext.privileged=true)`)
		expectRunning(pod("plain", plain))

		By("restricted: a plain pod is refused, one meeting restricted runs; the plain one already running is left alone")
		setLevel(ctx, ferryv1alpha1.PodSecurityRestricted)
		expectRefused(pod("plain-restricted", plain), `violates PodSecurity "restricted:latest"`, "runAsNonRoot", "allowPrivilegeEscalation")
		expectRunning(pod("compliant", restricted))
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, &corev1.Pod{})).To(Succeed())

		By("privileged, set by the provider's admin: a privileged pod runs")
		setLevel(ctx, ferryv1alpha1.PodSecurityPrivileged)
		expectRunning(pod("privileged-allowed", privileged))
	})

	It("holds each virtual kubelet to its own Node, Lease, VirtualNode and pods, as NodeRestriction holds kubelets", Label("security"), func(ctx context.Context) {
		remote, _ := offload(ctx, "vkr", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		plain := framework.CreateNamespace(ctx, consumer, "vkr-local")
		Expect(consumer.Client.Create(ctx, plainDeployment(remote, "api", 1))).To(Succeed())
		Expect(consumer.Client.Create(ctx, plainDeployment(plain, "web", 1))).To(Succeed())
		var remotePod, localPod corev1.Pod
		Eventually(func(g Gomega) {
			pods := podsOf(ctx, g, remote, "api")
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Spec.NodeName).To(Equal(virtualNode))
			remotePod = pods[0]
			pods = podsOf(ctx, g, plain, "web")
			g.Expect(pods).To(HaveLen(1))
			g.Expect(pods[0].Spec.NodeName).To(HavePrefix("local-"))
			localPod = pods[0]
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		as := func(virtualNode string) client.Client {
			GinkgoHelper()
			cfg := rest.CopyConfig(consumer.Config)
			cfg.Impersonate = framework.ServiceAccount(ferryv1alpha1.SystemNamespace, peering.VirtualKubeletIdentity(virtualNode))
			c, err := client.New(cfg, client.Options{Scheme: consumer.Client.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			return c
		}
		By("binding a second virtual kubelet identity, as the controller manager binds each")
		ghost := "ferry-ghost"
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: peering.VirtualKubeletIdentity(ghost)},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ferry-virtual-kubelet"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ferryv1alpha1.SystemNamespace, Name: peering.VirtualKubeletIdentity(ghost)}}}
		Expect(consumer.Client.Create(ctx, crb)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(consumer.Client.Delete(ctx, crb))).To(Succeed())
		})
		own, other := as(virtualNode), as(ghost)
		Eventually(func() error { // RBAC's cache takes the binding in
			return other.Get(ctx, client.ObjectKey{Name: virtualNode}, &corev1.Node{})
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		// Every write is a dry run: admission runs, nothing changes.
		touch := []byte(`{"metadata":{"labels":{"e2e.ferry.io/touched":"true"}}}`)
		patch := func(c client.Client, obj client.Object) error {
			return c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, touch), client.DryRunAll)
		}
		patchStatus := func(c client.Client, obj client.Object) error {
			return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{}`)), client.DryRunAll)
		}
		node := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
		lease := func(name string) *coordinationv1.Lease {
			return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}
		}
		vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: virtualNode}}
		cases := []struct {
			what    string
			do      func() error
			allowed bool
		}{
			{"its own Node", func() error { return patch(own, node(virtualNode)) }, true},
			{"its own Node's status", func() error { return patchStatus(own, node(virtualNode)) }, true},
			{"its own Lease", func() error { return patch(own, lease(virtualNode)) }, true},
			{"its own VirtualNode's status", func() error { return patchStatus(own, vn) }, true},
			{"the status of a pod bound to it", func() error { return patchStatus(own, remotePod.DeepCopy()) }, true},
			{"a pod bound to it, deleted", func() error { return own.Delete(ctx, remotePod.DeepCopy(), client.DryRunAll) }, true},
			{"a Node of its own name, created", func() error {
				return other.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ghost}}, client.DryRunAll)
			}, true},
			{"a local Node", func() error { return patch(own, node(localPod.Spec.NodeName)) }, false},
			{"a local Node's status", func() error { return patchStatus(own, node(localPod.Spec.NodeName)) }, false},
			{"the status of a local pod", func() error { return patchStatus(own, localPod.DeepCopy()) }, false},
			{"a local pod, deleted", func() error { return own.Delete(ctx, localPod.DeepCopy(), client.DryRunAll) }, false},
			{"another virtual kubelet's Node", func() error { return patch(other, node(virtualNode)) }, false},
			{"another virtual kubelet's Node status", func() error { return patchStatus(other, node(virtualNode)) }, false},
			{"another virtual kubelet's Lease", func() error { return patch(other, lease(virtualNode)) }, false},
			{"another virtual kubelet's VirtualNode status", func() error { return patchStatus(other, vn) }, false},
			{"the status of another virtual kubelet's pod", func() error { return patchStatus(other, remotePod.DeepCopy()) }, false},
			{"another virtual kubelet's pod, deleted", func() error { return other.Delete(ctx, remotePod.DeepCopy(), client.DryRunAll) }, false},
			{"a Node of another name, created", func() error {
				return other.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-someone-else"}}, client.DryRunAll)
			}, false},
		}
		for _, c := range cases {
			err := c.do()
			if c.allowed {
				Expect(err).NotTo(HaveOccurred(), "a virtual kubelet may change %s", c.what)
				continue
			}
			Expect(err).To(HaveOccurred(), "a virtual kubelet changed %s", c.what)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", c.what, err)
			Expect(err).To(MatchError(ContainSubstring("ferry-virtual-kubelet-restriction")), "%s: refused by the policy, not by RBAC", c.what)
		}
	})

	It("holds an in-place resize beyond the PeeringQuota pending, Deferred with the quota's reason, and lets it through once there is room", Label("offloading"), func(ctx context.Context) {
		ns, twin := offload(ctx, "resize", ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote})
		// Labelled so that kwok resizes it as a kubelet does (testbed.KwokResizeLabel).
		p := createCPUPod(ctx, consumer, ns, "resizable", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
			map[string]string{testbed.KwokResizeLabel: "true"})
		Eventually(func(g Gomega) { expectRunningWithCPU(ctx, g, consumer, p, "100m") }).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

		quota := &ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: "resize", Namespace: peering.TenantNamespace("consumer")},
			Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "consumer", Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		Expect(provider.Client.Create(ctx, quota)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(provider.Client.Delete(ctx, quota))).To(Succeed())
		})
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.ObservedGeneration).To(Equal(quota.Generation))
			g.Expect(quota.Status.Used.Cpu().Cmp(resource.MustParse("100m"))).To(BeNumerically(">=", 0), "the quota counts the pod")
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(Succeed(), "ferry sees the quota")

		By("2 CPUs: more than the quota, within the virtual node's allocatable (the consumer's API server refuses a resize beyond that itself)")
		Expect(resizeCPU(ctx, consumer, p, "2")).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			c := podCondition(p, corev1.PodResizePending)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(corev1.PodReasonDeferred))
			g.Expect(c.Message).To(ContainSubstring("PeeringQuota of consumer consumer exceeded"))
			var events corev1.EventList
			g.Expect(consumer.Client.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
			g.Expect(events.Items).To(ContainElement(And(HaveField("InvolvedObject.Name", p.Name), HaveField("Reason", offloading.ReasonResizeRefused))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(remoteCPU(ctx, g, provider, twin, p.Name).Cmp(resource.MustParse("100m"))).To(BeZero(), "the provider's pod keeps what the quota allowed")
			expectRunningWithCPU(ctx, g, consumer, p, "100m")
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())

		By("room in the quota: the pending resize goes through")
		Expect(provider.Client.Delete(ctx, quota)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(remoteCPU(ctx, g, provider, twin, p.Name).Cmp(resource.MustParse("2"))).To(BeZero())
			expectRunningWithCPU(ctx, g, consumer, p, "2")
			g.Expect(podCondition(p, corev1.PodResizePending)).To(BeNil())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
	})

	It("lets a consumer write ShadowPods only in its twin namespaces as itself, within its PeeringQuota, exactly under parallel creates and updates", func(ctx context.Context) {
		tenant := peering.TenantNamespace("consumer")
		// twinFor makes a namespace labelled as a twin namespace of owner
		// with the consumer's twin-namespace RoleBinding: one no virtual
		// kubelet manages, so the ShadowPods written here stay as written.
		twinFor := func(owner string) string {
			GinkgoHelper()
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "twin-", Labels: map[string]string{
				ferryv1alpha1.LabelOriginCluster: owner, ferryv1alpha1.LabelOriginNamespace: "quota-test"}}}
			Expect(provider.Client.Create(ctx, ns)).To(Succeed())
			DeferCleanup(func(ctx context.Context) {
				Expect(client.IgnoreNotFound(provider.Client.Delete(ctx, ns))).To(Succeed())
			})
			Expect(provider.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: peering.ConsumerRole, Namespace: ns.Name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ferryv1alpha1.TwinNamespaceClusterRole},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ferryv1alpha1.ConsumerServiceAccount, Namespace: tenant}}})).To(Succeed())
			return ns.Name
		}
		twin := twinFor("consumer")
		quota := &ferryv1alpha1.PeeringQuota{ObjectMeta: metav1.ObjectMeta{Name: "consumer", Namespace: tenant},
			Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "consumer", Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}
		Expect(provider.Client.Create(ctx, quota)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(provider.Client.Delete(ctx, quota))).To(Succeed())
		})

		// The consumer's own credential, as its virtual kubelet uses it.
		var cred corev1.Secret
		Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.CredentialsSecretName("provider")}, &cred)).To(Succeed())
		cfg, err := clientcmd.RESTConfigFromKubeConfig(cred.Data[ferryv1alpha1.KubeconfigSecretKey])
		Expect(err).NotTo(HaveOccurred())
		asConsumer, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
		Expect(err).NotTo(HaveOccurred())

		By("creating 8 ShadowPods of 600m at once against a 1-CPU quota: exactly one passes")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				errs[i] = asConsumer.Create(ctx, cpuShadowPod(twin, "race-"+string(rune('a'+i)), "consumer", "600m"))
			})
		}
		wg.Wait()
		admitted := 0
		for _, err := range errs {
			if err == nil {
				admitted++
				continue
			}
			Expect(err).To(MatchError(ContainSubstring("PeeringQuota of consumer consumer exceeded: cpu: requested 600m, used 600m, limited to 1")))
		}
		Expect(admitted).To(Equal(1))

		By("filling the quota to the millicore, then refusing one more")
		Expect(asConsumer.Create(ctx, cpuShadowPod(twin, "rest", "consumer", "400m"))).To(Succeed())
		Expect(asConsumer.Create(ctx, cpuShadowPod(twin, "one-more", "consumer", "1m"))).To(MatchError(ContainSubstring("PeeringQuota of consumer consumer exceeded: cpu: requested 1m")))
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.Used.Cpu().Cmp(resource.MustParse("1"))).To(BeZero(), "used %s", quota.Status.Used.Cpu())
			g.Expect(quota.Status.Reservations).To(BeEmpty())
			g.Expect(quota.Status.Conditions).To(ContainElement(And(HaveField("Type", ferryv1alpha1.PeeringQuotaExceeded), HaveField("Status", metav1.ConditionTrue))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("releasing room when a ShadowPod goes")
		Expect(provider.Client.Delete(ctx, &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: twin, Name: "rest"}})).To(Succeed())
		Eventually(func() error {
			return asConsumer.Create(ctx, cpuShadowPod(twin, "after", "consumer", "400m"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("raising three ShadowPods' requests at once with room for one raise: exactly one update passes")
		Expect(provider.Client.Delete(ctx, &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: twin, Name: "after"}})).To(Succeed())
		small := make([]*ferryv1alpha1.ShadowPod, 3)
		for i := range small {
			small[i] = cpuShadowPod(twin, "grow-"+string(rune('a'+i)), "consumer", "100m")
			Eventually(func() error { return asConsumer.Create(ctx, small[i]) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		// 600m + 3 × 100m used: 100m left, each update asks for 100m more.
		for i := range errs[:3] {
			wg.Go(func() {
				grown := small[i].DeepCopy()
				grown.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
				// A merge patch: the provider's controllers may write the
				// ShadowPod meanwhile, and a conflict is not what is tested.
				errs[i] = asConsumer.Patch(ctx, grown, client.MergeFrom(small[i]))
			})
		}
		wg.Wait()
		admitted = 0
		for _, err := range errs[:3] {
			if err == nil {
				admitted++
				continue
			}
			Expect(err).To(MatchError(ContainSubstring("PeeringQuota of consumer consumer exceeded: cpu")))
		}
		Expect(admitted).To(Equal(1))
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(quota), quota)).To(Succeed())
			g.Expect(quota.Status.Used.Cpu().Cmp(resource.MustParse("1"))).To(BeZero(), "used %s", quota.Status.Used.Cpu())
			g.Expect(quota.Status.Reservations).To(BeEmpty())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("refusing another identity, and a namespace that is not the consumer's twin even where RBAC lets it in")
		err = asConsumer.Create(ctx, cpuShadowPod(twin, "impostor", "someone-else", "1m"))
		Expect(err).To(MatchError(And(ContainSubstring("spec.consumerClusterID"), ContainSubstring("metadata.labels[ferry.io/origin-cluster]"))))
		foreign := twinFor("someone-else")
		Eventually(func() error {
			return asConsumer.Create(ctx, cpuShadowPod(foreign, "elsewhere", "consumer", "1m"))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(MatchError(ContainSubstring("only in its own twin namespaces")))
	})
})

// warningRecorder keeps the warnings the API server returns to a client.
type warningRecorder struct {
	mu       sync.Mutex
	warnings []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, text)
}

// take returns the warnings received since the last take.
func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.warnings
	w.warnings = nil
	return out
}
