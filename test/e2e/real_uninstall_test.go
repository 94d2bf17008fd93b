package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/controllers/peering"
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
		// A kubelet makes its node's Lease some time after the node is
		// Ready: wait for it, or it shows up as new later.
		for _, n := range c.RealNodes {
			Eventually(func() error {
				_, err := c.Kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n.Name, metav1.GetOptions{})
				return err
			}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "node %s's Lease", n.Name)
		}
		realBeforeInstall[c] = allObjects(ctx, c, "")
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
	fromNS := allObjects(ctx, provider, ferryv1alpha1.LabelOriginNamespace+"="+ns)
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
		g.Expect(allObjects(ctx, provider, ferryv1alpha1.LabelOriginNamespace+"="+ns)).To(BeEmpty())
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
	// The user's own objects go with their namespace; what is left to
	// compare afterwards is ferry's.
	Expect(consumer.Client.Delete(ctx, &nsObj)).To(Succeed())
	Eventually(func() error {
		return consumer.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	}).WithContext(ctx).WithTimeout(2*time.Minute).Should(MatchError(ContainSubstring("not found")), "namespace %s deleted", ns)

	By("ferryctl unpeer: no virtual node, nothing of the consumer left in the provider")
	start = time.Now()
	out, err = ferryctl(ctx, "unpeer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "4m")
	Expect(err).NotTo(HaveOccurred(), out)
	GinkgoWriter.Printf("ferryctl unpeer took %s\n", time.Since(start).Round(100*time.Millisecond))
	Eventually(func(g Gomega) {
		var nodes corev1.NodeList
		g.Expect(consumer.Client.List(ctx, &nodes)).To(Succeed())
		g.Expect(nodes.Items).To(ConsistOf(HaveField("Name", consumer.RealNodes[0].Name)))
		g.Expect(allObjects(ctx, provider, ferryv1alpha1.LabelOriginCluster+"="+string(realConsumerID))).To(BeEmpty())
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
	for _, c := range []*testbed.Cluster{provider, consumer} {
		now := allObjects(ctx, c, "")
		GinkgoWriter.Printf("%s right after the uninstall: added since the install:\n  %s\ngone since the install:\n  %s\n", c.Name,
			strings.Join(realAdded(realBeforeInstall[c], now), "\n  "), strings.Join(realAdded(now, realBeforeInstall[c]), "\n  "))
	}
	Eventually(func(g Gomega) {
		now := allObjects(ctx, provider, "")
		g.Expect(realAdded(realBeforeInstall[provider], now)).To(BeEmpty(), "objects of the provider that were not there before the install")
		g.Expect(realAdded(now, realBeforeInstall[provider])).To(BeEmpty(), "objects of the provider that were there before the install and are gone")
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

	By("the consumer keeps what README says helm uninstall keeps, nothing else")
	csrs := realVirtualKubeletCSRs(ctx, consumer)
	Expect(csrs).NotTo(BeEmpty(), "the virtual kubelet's serving certificate request")
	// What ferry's components made at run time in the namespace the release
	// did not make (helm install --create-namespace), and the CRDs (kept).
	kept := append(realKeptByHelmUninstall(string(realConsumerID)), csrs...)
	slices.Sort(kept)
	Eventually(func(g Gomega) {
		now := allObjects(ctx, consumer, "")
		g.Expect(realAdded(realBeforeInstall[consumer], now)).To(Equal(kept), "objects of the consumer that were not there before the install")
		g.Expect(realAdded(now, realBeforeInstall[consumer])).To(BeEmpty(), "objects of the consumer that were there before the install and are gone")
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

	By("README's last two commands: delete the CRDs labelled part-of=ferry and the ferry-system namespace; the consumer is as it was but for the issued certificate request")
	out, err = consumer.Kubectl(ctx, "delete", "crd", "-l", "app.kubernetes.io/part-of=ferry", "--wait")
	Expect(err).NotTo(HaveOccurred(), out)
	out, err = consumer.Kubectl(ctx, "delete", "namespace", charts.Namespace, "--wait")
	Expect(err).NotTo(HaveOccurred(), out)
	Eventually(func(g Gomega) {
		now := allObjects(ctx, consumer, "")
		g.Expect(realAdded(realBeforeInstall[consumer], now)).To(Equal(csrs), "objects of the consumer that were not there before the install")
		g.Expect(realAdded(now, realBeforeInstall[consumer])).To(BeEmpty(), "objects of the consumer that were there before the install and are gone")
	}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
}

// realKeptByHelmUninstall is what README says helm uninstall leaves in a
// cluster with ID id (besides issued certificate requests): ferry's CRDs and
// the API group the API server serves for them, and the ferry-system
// namespace with what ferry's components made in it at run time.
func realKeptByHelmUninstall(id string) []string {
	sys := charts.Namespace
	kept := []string{
		"/Namespace /" + sys,
		"/ConfigMap " + sys + "/kube-root-ca.crt",       // Kubernetes' own, in every namespace
		"/ServiceAccount " + sys + "/default",           // likewise
		"/ConfigMap " + sys + "/ferry-cluster-identity", // the recorded cluster ID
		"/ConfigMap " + sys + "/ferry-ipam",             // the network fabric's address allocations
		"/Secret " + sys + "/ferry-webhook-certs",       // ferry-webhook's self-managed CA and certificate
		"/Secret " + sys + "/ferry-gateway-key",         // the gateway's WireGuard key
		"coordination.k8s.io/Lease " + sys + "/ferry-controller-manager",
		"coordination.k8s.io/Lease " + sys + "/ferry-scheduler",
		"coordination.k8s.io/Lease " + sys + "/ferry-gateway", // the gateway replicas' election
		"ferry.io/NetworkConfig " + sys + "/" + id,            // the cluster's own networks
		"apiregistration.k8s.io/APIService /v1alpha1.ferry.io",
	}
	// Every CRD ferry ships (one file each in manifests/crds).
	crds, err := filepath.Glob("../../manifests/crds/ferry.io_*.yaml")
	Expect(err).NotTo(HaveOccurred())
	Expect(crds).NotTo(BeEmpty())
	for _, f := range crds {
		plural := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "ferry.io_"), ".yaml")
		kept = append(kept, "apiextensions.k8s.io/CustomResourceDefinition /"+plural+".ferry.io")
	}
	slices.Sort(kept)
	return kept
}

// realVirtualKubeletCSRs lists, as realObjects does, the certificate
// requests of ferry's virtual kubelets in c (for their serving
// certificates, to the kubelet-serving signer), each approved and issued.
func realVirtualKubeletCSRs(ctx context.Context, c *testbed.Cluster) []string {
	GinkgoHelper()
	var csrs certificatesv1.CertificateSigningRequestList
	Expect(c.Client.List(ctx, &csrs)).To(Succeed())
	var out []string
	for _, csr := range csrs.Items {
		// system:serviceaccount:<the VirtualNode's namespace>:ferry-vk-<node>
		parts := strings.Split(csr.Spec.Username, ":")
		if len(parts) != 4 || parts[1] != "serviceaccount" || !strings.HasPrefix(parts[3], peering.VirtualKubeletIdentity("")) {
			continue
		}
		Expect(csr.Spec.SignerName).To(Equal(certificatesv1.KubeletServingSignerName), "CSR %s", csr.Name)
		Expect(csr.Status.Certificate).NotTo(BeEmpty(), "CSR %s issued", csr.Name)
		out = append(out, "certificates.k8s.io/CertificateSigningRequest /"+csr.Name)
	}
	slices.Sort(out)
	return out
}

// realAdded is what now lists and before did not.
func realAdded(before, now []string) []string {
	var out []string
	for _, o := range now {
		if !slices.Contains(before, o) {
			out = append(out, o)
		}
	}
	return out
}
