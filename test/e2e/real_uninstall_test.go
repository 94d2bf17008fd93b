package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// realBeforeInstall is every object of the real-node bed's clusters before
// ferry was installed (by realSnapshotBeforeInstall), for the uninstall
// spec to compare with.
var realBeforeInstall = map[*testbed.Cluster][]string{}

// realSnapshotBeforeInstall records every object of both clusters.
func realSnapshotBeforeInstall(ctx context.Context) {
	for _, c := range []*testbed.Cluster{realConsumer, realProvider} {
		realBeforeInstall[c] = everything(ctx, c)
	}
}

// realUnoffloadAndUninstall: a namespace with offloaded pods and objects
// reflected into its twin is unoffloaded with ferryctl; nothing of the twin
// remains in the provider. Then ferryctl unpeer, helm uninstall on the
// consumer and ferryctl uninstall on the provider: the provider is as it
// was before the install; the consumer keeps what README says helm
// uninstall keeps (the CRDs, and the ferry-system namespace the release
// did not make), and after README's two commands it too is as it was.
// It must be the last real spec: ferry is gone after it.
func realUnoffloadAndUninstall(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "real-unoff")
	twin := framework.OffloadNamespace(ctx, consumer, ns, realProviderID)
	vnode := virtualNodeName(ctx, consumer, realProviderID)

	By("offloaded pods and objects reflected into the twin namespace")
	labels := map[string]string{"app": "sleeper"}
	Expect(consumer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"k": "v"}})).To(Succeed())
	Expect(consumer.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: ns}, StringData: map[string]string{"k": "v"}})).To(Succeed())
	Expect(consumer.Client.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80}}}})).To(Succeed())
	for _, name := range []string{"sleeper-a", "sleeper-b"} {
		Expect(consumer.Client.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "pause", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
				}},
			},
		})).To(Succeed())
	}
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).To(Equal(vnode), "pod %s", p.Name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
		}
		var remote corev1.PodList
		g.Expect(provider.Client.List(ctx, &remote, client.InNamespace(twin))).To(Succeed())
		g.Expect(remote.Items).To(HaveLen(2))
		var spods ferryv1alpha1.ShadowPodList
		g.Expect(provider.Client.List(ctx, &spods, client.InNamespace(twin))).To(Succeed())
		g.Expect(spods.Items).To(HaveLen(2))
		for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Service{}} {
			name := map[string]string{"*v1.ConfigMap": "settings", "*v1.Secret": "token", "*v1.Service": "sleeper"}[fmt.Sprintf("%T", obj)]
			g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: name}, obj)).To(Succeed(), "%T %s reflected", obj, name)
		}
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	fromNS := realLabelledObjects(ctx, provider, ferryv1alpha1.LabelOriginNamespace+"="+ns)
	Expect(fromNS).NotTo(BeEmpty())
	GinkgoWriter.Printf("in the provider, labelled %s=%s before unoffloading:\n  %s\n", ferryv1alpha1.LabelOriginNamespace, ns, strings.Join(fromNS, "\n  "))

	By("ferryctl unoffload namespace --wait: nothing of the twin namespace remains in the provider")
	start := time.Now()
	out, err := ferryctl(ctx, "unoffload", "namespace", ns, "--kubeconfig", consumer.KubeconfigPath, "--wait", "--timeout", "4m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Printf("ferryctl unoffload --wait took %s\n", time.Since(start).Round(100*time.Millisecond))
	Eventually(func(g Gomega) {
		err := provider.Client.Get(ctx, client.ObjectKey{Name: twin}, &corev1.Namespace{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "twin namespace %s still there", twin)
		g.Expect(realLabelledObjects(ctx, provider, ferryv1alpha1.LabelOriginNamespace+"="+ns)).To(BeEmpty())
		var spods ferryv1alpha1.ShadowPodList
		g.Expect(provider.Client.List(ctx, &spods)).To(Succeed())
		g.Expect(spods.Items).To(BeEmpty())
		var twins ferryv1alpha1.TwinNamespaceList
		g.Expect(provider.Client.List(ctx, &twins)).To(Succeed())
		g.Expect(twins.Items).To(BeEmpty(), "TwinNamespaces left (every offloaded namespace of the bed is gone or unoffloaded)")
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	GinkgoWriter.Printf("twin namespace gone %s after unoffloading\n", time.Since(start).Round(100*time.Millisecond))
	var nsObj corev1.Namespace
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: ns}, &nsObj)).To(Succeed())
	Expect(nsObj.Labels).NotTo(HaveKey(ferryv1alpha1.LabelOffloadingEnabled))
	var pods corev1.PodList
	Expect(consumer.Client.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	Expect(pods.Items).To(BeEmpty(), "the namespace's pods on the virtual node are drained")

	By("ferryctl unpeer: no virtual node, nothing of the consumer left in the provider")
	start = time.Now()
	out, err = ferryctl(ctx, "unpeer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "4m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Printf("ferryctl unpeer took %s\n", time.Since(start).Round(100*time.Millisecond))
	Eventually(func(g Gomega) {
		var nodes corev1.NodeList
		g.Expect(consumer.Client.List(ctx, &nodes)).To(Succeed())
		g.Expect(nodes.Items).To(ConsistOf(HaveField("Name", consumer.RealNodes[0].Name)))
		g.Expect(realLabelledObjects(ctx, provider, ferryv1alpha1.LabelOriginCluster+"="+realConsumerID)).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

	By("helm uninstall on the consumer")
	cfg := action.NewConfiguration()
	kubeconfig, namespace := consumer.KubeconfigPath, charts.Namespace
	Expect(cfg.Init(&genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &namespace}, namespace, "secret")).To(Succeed())
	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy, uninstall.Timeout = kube.StatusWatcherStrategy, 4*time.Minute
	start = time.Now()
	_, err = uninstall.Run(charts.ReleaseName)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("helm uninstall --wait took %s\n", time.Since(start).Round(100*time.Millisecond))

	By("ferryctl uninstall on the provider")
	start = time.Now()
	out, err = ferryctl(ctx, "uninstall", "--kubeconfig", provider.KubeconfigPath, "--timeout", "4m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Println(out)
	GinkgoWriter.Printf("ferryctl uninstall took %s\n", time.Since(start).Round(100*time.Millisecond))

	By("the provider is as it was before the install")
	Eventually(func(g Gomega) {
		g.Expect(strings.Join(everything(ctx, provider), "\n")).To(Equal(strings.Join(realBeforeInstall[provider], "\n")))
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed(), "objects of the provider before the install and after the uninstall differ")

	By("the consumer keeps the CRDs and the ferry-system namespace, nothing else")
	var kept []string
	Eventually(func(g Gomega) {
		kept = realAdded(realBeforeInstall[consumer], everything(ctx, consumer), ns)
		for _, o := range kept {
			g.Expect(o).To(Or(
				MatchRegexp(`^apiextensions.k8s.io/CustomResourceDefinition /[a-z]+\.ferry\.io$`),
				Equal("/Namespace /"+charts.Namespace),
				HavePrefix("/ConfigMap "+charts.Namespace+"/"),
				HavePrefix("/Secret "+charts.Namespace+"/"),
				HavePrefix("/ServiceAccount "+charts.Namespace+"/"),
				HavePrefix("coordination.k8s.io/Lease "+charts.Namespace+"/"),
			), "left by helm uninstall")
		}
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed())
	GinkgoWriter.Printf("left on the consumer by helm uninstall:\n  %s\n", strings.Join(kept, "\n  "))
	var crds []string
	for _, o := range kept {
		if strings.HasPrefix(o, "apiextensions.k8s.io/CustomResourceDefinition ") {
			crds = append(crds, o)
		}
	}
	Expect(crds).NotTo(BeEmpty(), "helm uninstall keeps the CRDs")

	By("README's last two commands: delete the CRDs labelled part-of=ferry and the ferry-system namespace; the consumer is as it was")
	out, err = consumer.Kubectl(ctx, "delete", "crd", "-l", "app.kubernetes.io/part-of=ferry", "--wait")
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = consumer.Kubectl(ctx, "delete", "namespace", charts.Namespace, "--wait")
	Expect(err).NotTo(HaveOccurred(), out)
	Eventually(func(g Gomega) {
		g.Expect(realAdded(realBeforeInstall[consumer], everything(ctx, consumer), ns)).To(BeEmpty())
		g.Expect(realAdded(everything(ctx, consumer), realBeforeInstall[consumer], ns)).To(BeEmpty(), "objects gone since the install")
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(2*time.Second).Should(Succeed())
}

// realAdded is what now lists and before did not, leaving out the objects of
// the specs' own namespace ns (made after the snapshot, deleted with it).
func realAdded(before, now []string, ns string) []string {
	var out []string
	for _, o := range now {
		if slices.Contains(before, o) || strings.Contains(o, " "+ns+"/") || strings.HasSuffix(o, "/Namespace /"+ns) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// realLabelledObjects lists every object of every listable kind c serves that
// matches the label selector, as "group/kind namespace/name".
func realLabelledObjects(ctx context.Context, c *testbed.Cluster, selector string) []string {
	GinkgoHelper()
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(c.Config)
	Expect(err).NotTo(HaveOccurred())
	lists, err := dc.ServerPreferredResources()
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: selector})
			Expect(err).NotTo(HaveOccurred(), "list %s", r.Name)
			for _, it := range items.Items {
				out = append(out, fmt.Sprintf("%s/%s %s/%s", gv.Group, r.Kind, it.GetNamespace(), it.GetName()))
			}
		}
	}
	slices.Sort(out)
	return out
}
