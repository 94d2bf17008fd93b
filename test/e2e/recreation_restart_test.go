package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

// A first real pod costs its ShadowPod no status write, so what tells a
// recreation from a first pod must survive the provider's controller
// manager being down while the pod goes: the consumer's virtual kubelet,
// which had reported the pod, records it lost on the ShadowPod, and the
// restarted controller manager counts the new pod as a restart.
var _ = Describe("Recreation across a controller restart", Label("recreation-restart"), Ordered, func() {
	var consumer, provider *testbed.Cluster
	var providerCM *framework.Proc
	var ns, twin string

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "provider", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1}}},
		)
		consumer, provider = clusters[0], clusters[1]
		cmBin, vkBin, webhookBin := framework.BuildBinary(ctx, "ferry-controller-manager"), framework.BuildVirtualKubelet(ctx), framework.BuildBinary(ctx, "ferry-webhook")
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		framework.StartWebhookProcess(ctx, webhookBin, consumer)
		framework.StartWebhookProcess(ctx, webhookBin, provider)
		framework.StartControllerManagerProcess(ctx, cmBin, vkBin, consumer, "consumer")
		providerCM = framework.StartControllerManagerProcess(ctx, cmBin, vkBin, provider, "provider")
		out, err := ferryctl(ctx, "peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "120s")
		Expect(err).NotTo(HaveOccurred(), out)
		ns = framework.CreateNamespace(ctx, consumer, "recreate")
		twin = framework.OffloadNamespace(ctx, consumer, ns, "provider")
	})

	It("counts a real pod deleted while the provider's controller manager is down as a restart, once", func(ctx context.Context) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: ns}, Spec: remotePodSpec()}
		Expect(consumer.Client.Create(ctx, pod)).To(Succeed())
		key := client.ObjectKey{Namespace: twin, Name: "solo"}
		var first corev1.Pod
		Eventually(func(g Gomega) {
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(provider.Client.Get(ctx, key, &first)).To(Succeed())
		}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())
		var sp ferryv1alpha1.ShadowPod
		Expect(provider.Client.Get(ctx, key, &sp)).To(Succeed())
		Expect(sp.Status.PodName).To(BeEmpty(), "a first pod costs no ShadowPod status write")

		By("killing the provider's controller manager and deleting the real pod for good meanwhile")
		providerCM.Kill()
		Expect(provider.Client.Delete(ctx, &first, client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) {
			err := provider.Client.Get(ctx, key, &corev1.Pod{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "pod still there: %v", err)
			g.Expect(provider.Client.Get(ctx, key, &sp)).To(Succeed())
			g.Expect(sp.Annotations).To(HaveKey(ferryv1alpha1.AnnotationPodLost), "the virtual kubelet records the lost pod")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("starting the provider's controller manager again")
		providerCM.Start()
		Eventually(func(g Gomega) {
			var again corev1.Pod
			g.Expect(provider.Client.Get(ctx, key, &again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(first.UID))
			g.Expect(provider.Client.Get(ctx, key, &sp)).To(Succeed())
			g.Expect(sp.Status.Recreations).To(BeEquivalentTo(1))
			var local corev1.Pod
			g.Expect(consumer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &local)).To(Succeed())
			g.Expect(local.UID).To(Equal(pod.UID))
			g.Expect(local.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(local.Status.ContainerStatuses).To(ConsistOf(HaveField("RestartCount", int32(1))))
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(provider.Client.Get(ctx, key, &sp)).To(Succeed())
			g.Expect(sp.Status.Recreations).To(BeEquivalentTo(1), "counted once")
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(consumer.Client.Delete(ctx, pod)).To(Succeed())
	})
})
