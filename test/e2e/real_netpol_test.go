package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
)

// realNetworkPolicy (issue 35): a namespace offloaded LocalAndRemote, an
// offloaded agnhost server, a deny-all policy and one allowing ingress to
// the server from pods labelled access=true. Each real node runs SIG
// Network's kube-network-policies (the bed's NetworkPolicy engine). The
// consumer's pods with the label reach the server through the fabric (the
// copy in the twin namespace allows their remapped addresses), those
// without time out; the same holds for offloaded pods (real pods of the
// twin namespace, matched by label) and a pod of another namespace of the
// provider is denied. A pod given the label later is let in (the copy
// follows it); deleting the policies opens the server again.
func realNetworkPolicy(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "netpol")
	twin := framework.OffloadNamespaceWith(ctx, consumer, ns, realProviderID, ferryv1alpha1.PodOffloadingLocalAndRemote)
	here, there := consumer.RealNodes[0].Name, virtualNodeName(ctx, consumer, realProviderID)
	other := framework.CreateNamespace(ctx, provider, "netpol-local")

	allowed := map[string]string{"access": "true"}
	createNetexecPod(ctx, consumer, ns, "server", map[string]string{"app": "server"}, pinTo(there))
	createNetexecPod(ctx, consumer, ns, "home-allowed", allowed, pinTo(here))
	createNetexecPod(ctx, consumer, ns, "home-denied", nil, pinTo(here))
	createNetexecPod(ctx, consumer, ns, "away-allowed", allowed, pinTo(there))
	createNetexecPod(ctx, consumer, ns, "away-denied", nil, pinTo(there))
	createNetexecPod(ctx, provider, other, "provider-local", allowed, nil)
	waitReadyPods(ctx, consumer, ns, nil, 5)
	waitReadyPods(ctx, provider, other, nil, 1)

	var server corev1.Pod
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "server"}, &server)).To(Succeed())
	remoteServer, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, "server", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(remoteServer.Labels).To(HaveKeyWithValue("app", "server"), "the offloaded pod carries the consumer pod's labels")
	printPodIPs(ctx, consumer, ns)
	printPodIPs(ctx, provider, twin)

	// Each client, and the server's address as its cluster shows it.
	type caller struct {
		c       *netexecClient
		server  string
		allowed bool
	}
	clients := []caller{
		{openNetexecClient(ctx, consumer, ns, "home-allowed"), server.Status.PodIP, true},
		{openNetexecClient(ctx, consumer, ns, "home-denied"), server.Status.PodIP, false},
		{openNetexecClient(ctx, consumer, ns, "away-allowed"), remoteServer.Status.PodIP, true},
		{openNetexecClient(ctx, consumer, ns, "away-denied"), remoteServer.Status.PodIP, false},
		{openNetexecClient(ctx, provider, other, "provider-local"), remoteServer.Status.PodIP, false},
	}
	reaches := func(cl caller) bool {
		a, err := cl.c.dialPort(ctx, cl.server, netexecPort, "hostname", 1)
		Expect(err).NotTo(HaveOccurred())
		return len(a.Responses) == 1 && a.Responses[0] == "server"
	}
	expectOpen := func(what string) {
		GinkgoHelper()
		start := time.Now()
		for _, cl := range clients {
			Eventually(func() bool { return reaches(cl) }).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(time.Second).
				Should(BeTrue(), "%s: %s reaches the server at %s", what, cl.c.name, cl.server)
		}
		GinkgoWriter.Printf("%s: every client reached the server (%s)\n", what, time.Since(start).Round(100*time.Millisecond))
	}

	By("without a policy every client reaches the server")
	expectOpen("no policy")

	By("deny-all and allow-from-label policies in the consumer's namespace")
	start := time.Now()
	port := intstr.FromInt32(netexecPort)
	for _, p := range []*networkingv1.NetworkPolicy{{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-access"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: allowed}}},
			}},
		},
	}} {
		Expect(consumer.Client.Create(ctx, p)).To(Succeed())
	}
	var homeAllowed, homeDenied corev1.Pod
	Expect(consumer.Client.Get(ctx, objKey(ns, "home-allowed"), &homeAllowed)).To(Succeed())
	Expect(consumer.Client.Get(ctx, objKey(ns, "home-denied"), &homeDenied)).To(Succeed())
	copyBlocks := func(g Gomega) []string {
		var np networkingv1.NetworkPolicy
		g.Expect(provider.Client.Get(ctx, objKey(twin, "allow-access"), &np)).To(Succeed())
		g.Expect(np.Spec.Ingress).To(HaveLen(1))
		var blocks []string
		for _, peer := range np.Spec.Ingress[0].From {
			if peer.IPBlock != nil {
				blocks = append(blocks, peer.IPBlock.CIDR)
			}
		}
		g.Expect(np.Spec.Ingress[0].From).To(ContainElement(HaveField("PodSelector", Equal(&metav1.LabelSelector{MatchLabels: allowed}))))
		return blocks
	}
	var blocks []string
	Eventually(func(g Gomega) {
		blocks = copyBlocks(g)
		g.Expect(blocks).To(HaveLen(1), "the copy allows the one labelled consumer pod by address")
		g.Expect(provider.Client.Get(ctx, objKey(twin, "deny-all"), &networkingv1.NetworkPolicy{})).To(Succeed())
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	GinkgoWriter.Printf("the copies are in %s %s after create; allow-access allows %v (home-allowed is %s in the consumer)\n",
		twin, time.Since(start).Round(100*time.Millisecond), blocks, homeAllowed.Status.PodIP)

	start = time.Now()
	for _, cl := range clients {
		if !cl.allowed {
			Eventually(func() bool { return reaches(cl) }).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).
				Should(BeFalse(), "%s is denied", cl.c.name)
		}
	}
	GinkgoWriter.Printf("every denied client timed out %s after the copies were made\n", time.Since(start).Round(100*time.Millisecond))
	for _, cl := range clients {
		Expect(reaches(cl)).To(Equal(cl.allowed), "with the policies, %s reaching the server", cl.c.name)
	}

	By("a consumer pod given the label is let in: the copy follows it")
	start = time.Now()
	Expect(consumer.Client.Patch(ctx, &homeDenied, client.RawPatch(k8stypes.MergePatchType, []byte(`{"metadata":{"labels":{"access":"true"}}}`)))).To(Succeed())
	Eventually(copyBlocks).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(HaveLen(2))
	Eventually(func() bool { return reaches(clients[1]) }).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue())
	GinkgoWriter.Printf("the relabelled pod reached the server %s after its label changed\n", time.Since(start).Round(100*time.Millisecond))

	By("deleting the policies opens the server again")
	start = time.Now()
	for _, name := range []string{"deny-all", "allow-access"} {
		Expect(consumer.Client.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, name := range []string{"deny-all", "allow-access"} {
			err := provider.Client.Get(ctx, objKey(twin, name), &networkingv1.NetworkPolicy{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "copy %s/%s: %v", twin, name, err)
		}
	}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	expectOpen("policies deleted")
	GinkgoWriter.Printf("open again %s after the policies were deleted\n", time.Since(start).Round(100*time.Millisecond))
}

func objKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
