package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/webhooks"
)

// placementCase is a pod created in a namespace offloaded by a
// NamespaceOffloading spec (none: labelled, without one; deleting: its
// NamespaceOffloading is being deleted).
type placementCase struct {
	name     string
	nso      *ferryv1alpha1.NamespaceOffloadingSpec
	deleting bool
	pod      func(*corev1.Pod)
}

// placementOutcome is what the API server answered a dry-run creation with:
// the pod as it would be stored, or the refusal.
type placementOutcome struct {
	pod    *corev1.Pod
	denial string
}

// ferryRuntimeClass opts a pod into virtual nodes by RuntimeClass ferry.
func ferryRuntimeClass(p *corev1.Pod) {
	p.Spec.RuntimeClassName = ptr.To(ferryv1alpha1.RuntimeClassVirtual)
}

func term(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func requirement(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func annotate(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func requireNodes(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
}

func both(a, b func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) { a(p); b(p) }
}

var _ = Describe("Pod placement by admission policy", Label("webhooks"), Ordered, func() {
	remote := &ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote}
	local := &ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocal}
	selected := &ferryv1alpha1.NamespaceOffloadingSpec{
		PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote, SchedulerName: "ferry-scheduler",
		ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			term(requirement("topology.kubernetes.io/region", corev1.NodeSelectorOpIn, "eu-west", "eu-south")),
			term(requirement(ferryv1alpha1.LabelClusterID, corev1.NodeSelectorOpIn, "c1"), requirement("gpu", corev1.NodeSelectorOpExists)),
		}},
	}
	ssd := requirement("disk", corev1.NodeSelectorOpIn, "ssd")
	arm := requirement("kubernetes.io/arch", corev1.NodeSelectorOpIn, "arm64")
	virtual := requirement(ferryv1alpha1.LabelNodeType, corev1.NodeSelectorOpIn, ferryv1alpha1.NodeTypeVirtual)
	cases := []placementCase{
		{name: "plain pod, Remote namespace", nso: remote},
		{name: "plain pod, Local namespace", nso: local},
		{name: "plain pod, LocalAndRemote namespace with selector and scheduler", nso: selected},
		{name: "plain pod, namespace without NamespaceOffloading"},
		{name: "plain pod, NamespaceOffloading being deleted", nso: remote, deleting: true},
		{name: "pod narrowing to Remote", nso: selected, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Remote")},
		{name: "pod narrowing to Local", nso: selected, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Local")},
		{name: "pod keeping the namespace's strategy", nso: remote, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Remote", ferryv1alpha1.AnnotationConsumerAPIServer, "false")},
		{name: "pod with two node selector terms", nso: selected, pod: requireNodes(term(ssd), term(arm))},
		{name: "pod with the same term twice", nso: remote, pod: requireNodes(term(ssd), term(ssd))},
		{name: "pod already placed", nso: remote, pod: both(requireNodes(term(ssd, virtual)),
			annotate(webhooks.AnnotationAppliedPolicy, "strategy=Remote; added toleration, nodeAffinity"))},
		{name: "pod placed differently before", nso: remote, pod: annotate(webhooks.AnnotationAppliedPolicy, "strategy=Local; added nodeAffinity")},
		{name: "pod already tolerating every taint", nso: remote, pod: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}},
		{name: "pod tolerating the taint by Equal", nso: selected, pod: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute}}
		}},
		{name: "pod tolerating the taint for NoSchedule only", nso: remote, pod: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "pod with a scheduler of its own", nso: selected, pod: func(p *corev1.Pod) { p.Spec.SchedulerName = "my-scheduler" }},
		{name: "pod with a pod affinity only", nso: remote, pod: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}}
		}},
		{name: "refused: unknown annotation", nso: remote, pod: annotate("ferry.io/colour", "blue")},
		{name: "refused: unknown strategy", nso: selected, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Anywhere")},
		{name: "refused: widening Local", nso: local, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Remote")},
		{name: "refused: widening while deleting", nso: remote, deleting: true, pod: annotate(placement.AnnotationPodOffloadingStrategy, "Remote")},
		{name: "refused: consumer-api-server not a boolean", nso: remote, pod: annotate(ferryv1alpha1.AnnotationConsumerAPIServer, "maybe")},
		{name: "RuntimeClass ferry in a Local namespace", nso: local, pod: ferryRuntimeClass},
		{name: "RuntimeClass ferry annotated Remote, with a remote RuntimeClass, in a Local namespace", nso: local, pod: both(ferryRuntimeClass,
			annotate(placement.AnnotationPodOffloadingStrategy, "Remote", ferryv1alpha1.AnnotationRemoteRuntimeClass, "kata"))},
		{name: "refused: RuntimeClass ferry annotated Local", nso: selected, pod: both(ferryRuntimeClass, annotate(placement.AnnotationPodOffloadingStrategy, "Local"))},
		{name: "refused: RuntimeClass ferry while deleting", nso: remote, deleting: true, pod: ferryRuntimeClass},
		{name: "refused: remote RuntimeClass not a name", nso: remote, pod: annotate(ferryv1alpha1.AnnotationRemoteRuntimeClass, "Not_A_Name")},
	}

	var (
		consumer   *testbed.Cluster
		cluster    client.Client
		baseURL    string
		namespaces = map[int]string{}
		byWebhook  = map[int]placementOutcome{}
	)

	// create dry-runs the creation of a pod in case i's namespace, changed
	// by mutate.
	create := func(ctx context.Context, i int, mutate func(*corev1.Pod)) placementOutcome {
		GinkgoHelper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: namespaces[i], Labels: map[string]string{"app": "placement"}},
			Spec: corev1.PodSpec{
				// No token volume: its name is random.
				AutomountServiceAccountToken: ptr.To(false),
				Containers:                   []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}},
			},
		}
		if mutate != nil {
			mutate(pod)
		}
		err := cluster.Create(ctx, pod, client.DryRunAll)
		if err != nil {
			Expect(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)).To(BeTrue(), "case %q: %v", cases[i].name, err)
			return placementOutcome{denial: err.Error()}
		}
		pod.ObjectMeta = metav1.ObjectMeta{Annotations: pod.Annotations}
		pod.Status = corev1.PodStatus{}
		return placementOutcome{pod: pod}
	}

	BeforeAll(func(ctx context.Context) {
		consumer = framework.StartClusters(ctx, testbed.Options{Name: "placement"})[0]
		cluster = consumer.Client
		framework.ApplyManifests(ctx, consumer, "base")
		stop, err := localwebhook.RunAdmission(ctx, consumer.Config, consumer.Client, func(url string) (*localwebhook.Admission, error) {
			baseURL = url
			return localwebhook.Load(framework.RepoRoot(), url, localwebhook.PlacementWebhook)
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stop)
		for i, tc := range cases {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "placement-",
				Labels: map[string]string{ferryv1alpha1.LabelOffloadingEnabled: "true"}}}
			Expect(cluster.Create(ctx, ns)).To(Succeed())
			namespaces[i] = ns.Name
			Expect(cluster.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns.Name}})).To(Succeed())
			if tc.nso == nil {
				continue
			}
			nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns.Name}, Spec: *tc.nso}
			if tc.deleting {
				// Held by a finalizer of the test: no controller runs here.
				nso.Finalizers = []string{"e2e.ferry.io/hold"}
			}
			Expect(cluster.Create(ctx, nso)).To(Succeed())
			if tc.deleting {
				Expect(cluster.Delete(ctx, nso)).To(Succeed())
				DeferCleanup(func(ctx context.Context) {
					Expect(client.IgnoreNotFound(cluster.Patch(ctx, nso, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
				})
			}
		}
	})

	// outcomes creates every case's pod, once the placement in force sees
	// every namespace's NamespaceOffloading as it is.
	outcomes := func(ctx context.Context) map[int]placementOutcome {
		GinkgoHelper()
		out := map[int]placementOutcome{}
		for i, tc := range cases {
			switch {
			case tc.deleting:
				// A plain pod is placed until the deletion is seen.
				Eventually(func(g Gomega) {
					o := create(ctx, i, nil)
					g.Expect(o.pod).NotTo(BeNil())
					g.Expect(o.pod.Annotations).NotTo(HaveKey(webhooks.AnnotationAppliedPolicy))
				}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
			case tc.nso != nil:
				Expect(localwebhook.WaitPlaced(ctx, cluster, namespaces[i], time.Minute)).To(Succeed())
			}
			if strings.HasPrefix(tc.name, "refused") {
				// Validating policies, too, apply a moment after their creation.
				Eventually(func(g Gomega) {
					out[i] = create(ctx, i, tc.pod)
					g.Expect(out[i].denial).NotTo(BeEmpty())
				}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), tc.name)
				continue
			}
			out[i] = create(ctx, i, tc.pod)
		}
		return out
	}

	It("places and refuses pods by ferry-webhook's pod webhook", func(ctx context.Context) {
		byWebhook = outcomes(ctx)
		for i, tc := range cases {
			o := byWebhook[i]
			switch {
			case strings.HasPrefix(tc.name, "refused"):
				Expect(o.denial).To(ContainSubstring(`admission webhook "pods.mutate.ferry.io" denied the request`), tc.name)
			case tc.nso == nil || tc.deleting:
				Expect(o.pod.Annotations).NotTo(HaveKey(webhooks.AnnotationAppliedPolicy), tc.name)
			default:
				Expect(o.pod.Annotations).To(HaveKey(webhooks.AnnotationAppliedPolicy), tc.name)
				Expect(o.pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).NotTo(BeEmpty(), tc.name)
			}
		}
	})

	It("gives every pod the same placement, and the same refusals, by the admission policies alone", func(ctx context.Context) {
		By("installing manifests/webhook-policy's objects, without the pod webhook")
		a, err := localwebhook.Load(framework.RepoRoot(), baseURL, localwebhook.PlacementPolicy)
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Install(ctx, cluster)).To(Succeed())
		var m admissionregistrationv1.MutatingWebhookConfiguration
		Expect(cluster.Get(ctx, client.ObjectKey{Name: webhooks.ConfigurationName}, &m)).To(Succeed())
		for _, w := range m.Webhooks {
			Expect(w.Name).NotTo(Equal("pods.mutate.ferry.io"), "the pod webhook would be compared with itself")
		}

		byPolicy := outcomes(ctx)
		for i, tc := range cases {
			w, p := byWebhook[i], byPolicy[i]
			if w.denial != "" {
				_, reason, _ := strings.Cut(w.denial, "denied the request: ")
				Expect(p.denial).To(ContainSubstring("ValidatingAdmissionPolicy"), tc.name)
				Expect(p.denial).To(ContainSubstring(reason), tc.name)
				continue
			}
			Expect(p.denial).To(BeEmpty(), tc.name)
			want, err := yaml.Marshal(w.pod)
			Expect(err).NotTo(HaveOccurred())
			got, err := yaml.Marshal(p.pod)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(got)).To(Equal(string(want)), "case %q: the policies' pod (got) differs from the webhook's (want)", tc.name)
		}
	})

	It("installs with kustomize as manifests/webhook-policy, the pod webhook left out", func(ctx context.Context) {
		out, err := consumer.Kubectl(ctx, "kustomize", filepath.Join(framework.RepoRoot(), "manifests", "webhook-policy"))
		Expect(err).NotTo(HaveOccurred(), out)
		policies, err := localwebhook.Policies(framework.RepoRoot())
		Expect(err).NotTo(HaveOccurred())
		Expect(policies).To(HaveLen(6))
		for _, p := range policies {
			Expect(out).To(ContainSubstring(fmt.Sprintf("kind: %s\nmetadata:\n  name: %s\n", p.GetObjectKind().GroupVersionKind().Kind, p.GetName())))
		}
		Expect(out).To(ContainSubstring("name: pvcs.mutate.ferry.io"))
		Expect(out).NotTo(ContainSubstring("name: pods.mutate.ferry.io"))
	})
})
