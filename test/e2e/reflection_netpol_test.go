package e2e

import (
	"context"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// reflectNetworkPolicy (issue 35) checks the translated copy of a
// NetworkPolicy of the offloaded namespace ns on the kwok bed: a peer
// selecting pods of a namespace that is not offloaded becomes the ipBlocks
// of their addresses at the provider, which follow the pods coming and
// going; an ipBlock in the consumer's pod range is mapped; deleting the
// policy deletes the copy.
func reflectNetworkPolicy(ctx context.Context, consumer, provider *testbed.Cluster, ns, twin string) {
	network := framework.WaitPeerNetwork(ctx, consumer, "consumer", "provider")
	peers := framework.CreateNamespace(ctx, consumer, "peers")
	var pns corev1.Namespace
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: peers}, &pns)).To(Succeed())
	pns.Labels["team"] = "frontend"
	Expect(consumer.Client.Update(ctx, &pns)).To(Succeed())

	newPod := func(name string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: peers, Name: name, Labels: map[string]string{"role": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/web"}}},
		}
		// Refused until the namespace's default service account exists.
		Eventually(func() error { return consumer.Client.Create(ctx, p) }).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		return p
	}
	podIP := func(p *corev1.Pod) string {
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			g.Expect(p.Status.PodIP).NotTo(BeEmpty())
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		return network.ConsumerPodIP(p.Status.PodIP) + "/32"
	}
	web1 := newPod("web-1")
	ip1 := podIP(web1)

	policy := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-frontend"},
		Spec: networkingv1.NetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "frontend"}}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.244.5.0/24"}},
			}}},
		},
	}
	Expect(consumer.Client.Create(ctx, policy)).To(Succeed())
	mappedBlock := network.ConsumerPodIP("10.244.5.0") + "/24"
	blocks := func(g Gomega) []string {
		var np networkingv1.NetworkPolicy
		g.Expect(provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "from-frontend"}, &np)).To(Succeed())
		g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
		g.Expect(np.Spec.Ingress).To(HaveLen(1))
		var out []string
		for _, p := range np.Spec.Ingress[0].From {
			g.Expect(p.IPBlock).NotTo(BeNil(), "no namespace of the selector is offloaded here: addresses only")
			out = append(out, p.IPBlock.CIDR)
		}
		return out
	}
	eventually := func(want ...string) {
		Eventually(blocks).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(ConsistOf(want), "ipBlocks of the copy")
	}
	eventually(ip1, mappedBlock)

	web2 := newPod("web-2")
	ip2 := podIP(web2)
	eventually(ip1, ip2, mappedBlock)

	Expect(consumer.Client.Delete(ctx, web1, client.GracePeriodSeconds(0))).To(Succeed())
	eventually(ip2, mappedBlock)

	Expect(consumer.Client.Delete(ctx, policy)).To(Succeed())
	Eventually(func() bool {
		err := provider.Client.Get(ctx, client.ObjectKey{Namespace: twin, Name: "from-frontend"}, &networkingv1.NetworkPolicy{})
		return apierrors.IsNotFound(err)
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
}
