package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

var _ = Describe("The test bed", Label("testbed"), Ordered, func() {
	var consumer, provider *testbed.Cluster

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer"},
			testbed.Options{
				Name:              "provider",
				ControllerManager: true,
				Scheduler:         true,
				Nodes: []testbed.NodePool{
					{Name: "small", Count: 2, CPU: "4", Memory: "16Gi"},
					{Name: "gpu", Count: 1, CPU: "32", Memory: "128Gi", Extended: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
				},
			},
		)
		consumer, provider = clusters[0], clusters[1]
		for _, c := range clusters {
			rss, err := c.MemoryRSS()
			Expect(err).NotTo(HaveOccurred())
			var total int64
			for _, b := range rss {
				total += b
			}
			AddReportEntry(fmt.Sprintf("cluster %s", c.Name), fmt.Sprintf("started in %s; RSS %d MiB %v",
				c.StartupDuration.Round(time.Millisecond), total>>20, mib(rss)))
		}
	})

	It("runs exactly the components each cluster asked for", func() {
		Expect(names(consumer.PIDs())).To(ConsistOf("etcd", "kube-apiserver"))
		Expect(names(provider.PIDs())).To(ConsistOf("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"))
	})

	It("installs ferry's manifests into both clusters with server-side apply", func(ctx context.Context) {
		for _, c := range []*testbed.Cluster{consumer, provider} {
			By("applying manifests/base to " + c.Name)
			framework.ApplyManifests(ctx, c, "base")
			var crds apiextensionsv1.CustomResourceDefinitionList
			Expect(c.Client.List(ctx, &crds)).To(Succeed())
			Expect(crds.Items).To(ConsistOf(
				crdNamed("foreignclusters.ferry.io"), crdNamed("resourceslices.ferry.io"), crdNamed("virtualnodes.ferry.io"),
				crdNamed("namespaceoffloadings.ferry.io"), crdNamed("shadowpods.ferry.io"), crdNamed("peeringquotas.ferry.io"),
				crdNamed("networkconfigs.ferry.io"), crdNamed("twinnamespaces.ferry.io"), crdNamed("volumemoves.ferry.io"),
			))
			Expect(c.Client.Get(ctx, client.ObjectKey{Name: "ferry-system"}, &corev1.Namespace{})).To(Succeed())
			for _, role := range []string{"ferry-namespace-admin", "ferry-namespace-viewer", "ferry-cluster-admin", "ferry-cluster-viewer"} {
				Expect(c.Client.Get(ctx, client.ObjectKey{Name: role}, &rbacv1.ClusterRole{})).To(Succeed(), "ClusterRole %s in %s", role, c.Name)
			}
		}
		By("applying again, which conflicts with nothing and writes nothing")
		var before apiextensionsv1.CustomResourceDefinitionList
		Expect(provider.Client.List(ctx, &before)).To(Succeed())
		out, err := provider.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-e2e", "-k", framework.RepoRoot()+"/manifests/base")
		Expect(err).NotTo(HaveOccurred(), out)
		for _, crd := range before.Items {
			var after apiextensionsv1.CustomResourceDefinition
			Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(&crd), &after)).To(Succeed())
			Expect(after.ResourceVersion).To(Equal(crd.ResourceVersion), "re-applying the manifests rewrote CRD %s", crd.Name)
		}

		By("applying the controller manager's kustomization")
		out, err = provider.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-e2e", "-k", framework.RepoRoot()+"/manifests/controller-manager")
		Expect(err).NotTo(HaveOccurred(), out)
		var deploy appsv1.Deployment
		Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "ferry-controller-manager"}, &deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.ServiceAccountName).To(Equal("ferry-controller-manager"))

		By("applying the gateway's kustomization")
		out, err = provider.Kubectl(ctx, "apply", "--server-side", "--field-manager=ferry-e2e", "-k", framework.RepoRoot()+"/manifests/gateway")
		Expect(err).NotTo(HaveOccurred(), out)
		var agents appsv1.DaemonSet
		Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "ferry-route-agent"}, &agents)).To(Succeed())
		Expect(agents.Spec.Template.Spec.HostNetwork).To(BeTrue())
		Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: "ferry-system", Name: "ferry-gateway"}, &deploy)).To(Succeed())
		Expect(deploy.Spec.Template.Spec.HostNetwork).To(BeFalse(), "the gateway is a pod of the cluster network")

		By("aggregating the namespace roles into Kubernetes' view role (controller-manager's aggregation controller)")
		Eventually(func(g Gomega) {
			var view rbacv1.ClusterRole
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Name: "view"}, &view)).To(Succeed())
			g.Expect(view.Rules).To(ContainElement(HaveField("Resources", ContainElement("namespaceoffloadings"))))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("runs a Deployment to its ready replicas on kwok nodes", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, provider, "deploy")
		labels := map[string]string{"app": "web"}
		deploy := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](5),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "web", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
					}}},
				},
			},
		}
		Expect(provider.Client.Create(ctx, deploy)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)).To(Succeed())
			g.Expect(deploy.Status.ReadyReplicas).To(BeEquivalentTo(5))
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		var pods corev1.PodList
		Expect(provider.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		Expect(pods.Items).To(HaveLen(5))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).NotTo(BeEmpty(), "pod %s was not scheduled", p.Name)
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(p.Status.PodIP).To(HavePrefix("10.244."), "kwok gives pod IPs from the cluster's pod CIDR")
		}
	})

	It("schedules by the node shapes it was given (extended resources included)", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, provider, "shapes")
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "trainer", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "t", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")},
				},
			}}},
		}
		Expect(provider.Client.Create(ctx, pod)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Spec.NodeName).To(Equal("gpu-0"))
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("keeps the two clusters apart: no shared objects, nodes or credentials", func(ctx context.Context) {
		ns := framework.CreateNamespace(ctx, consumer, "only-here")
		Expect(apierrors.IsNotFound(provider.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))).To(BeTrue(),
			"namespace %s of the consumer is visible in the provider", ns)

		fc := &ferryv1alpha1.ForeignCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "someone"},
			Spec:       ferryv1alpha1.ForeignClusterSpec{ClusterID: "someone", Role: ferryv1alpha1.RoleConsumer},
		}
		Expect(provider.Client.Create(ctx, fc)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(provider.Client.Delete(ctx, fc)).To(Succeed()) })
		Expect(apierrors.IsNotFound(consumer.Client.Get(ctx, client.ObjectKeyFromObject(fc), &ferryv1alpha1.ForeignCluster{}))).To(BeTrue())

		var nodes corev1.NodeList
		Expect(consumer.Client.List(ctx, &nodes)).To(Succeed())
		Expect(nodes.Items).To(BeEmpty(), "the consumer sees the provider's nodes")

		Expect(consumer.APIServerURL).NotTo(Equal(provider.APIServerURL))
		Expect(consumer.CAPEM()).NotTo(Equal(provider.CAPEM()))

		By("presenting the consumer's admin certificate to the provider's API server")
		cross := rest.CopyConfig(consumer.Config)
		cross.Host = provider.APIServerURL
		cross.CAData = provider.CAPEM()
		kube, err := kubernetes.NewForConfig(cross)
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsUnauthorized(err)).To(BeTrue(), "the provider accepted the consumer's credentials: %v", err)
	})

	It("issues user credentials that RBAC applies to", func(ctx context.Context) {
		_, cfg, err := provider.UserKubeconfig("alice")
		Expect(err).NotTo(HaveOccurred())
		kube, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a user without bindings listed secrets: %v", err)
		Expect(err.Error()).To(ContainSubstring(`"alice"`))
	})
})

func crdNamed(name string) types.GomegaMatcher {
	return HaveField("ObjectMeta.Name", name)
}

func names(pids map[string]int) []string {
	out := make([]string, 0, len(pids))
	for name := range pids {
		out = append(out, name)
	}
	return out
}

func mib(rss map[string]int64) string {
	parts := make([]string, 0, len(rss))
	for name, b := range rss {
		parts = append(parts, fmt.Sprintf("%s=%dMiB", name, b>>20))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
