package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/realbed"
)

// realAPIServerFromOffloadedPod: an offloaded pod runs kubectl with the
// in-cluster configuration and talks to the consumer's API server, as its
// own service account of the consumer, through the fabric's API-server
// mapping; a token of another namespace's service account gets nothing.
func realAPIServerFromOffloadedPod(ctx context.Context) {
	consumer, provider := realConsumer, realProvider
	ns := framework.CreateNamespace(ctx, consumer, "api")
	other := framework.CreateNamespace(ctx, consumer, "api-other")
	twin := framework.OffloadNamespace(ctx, consumer, ns, realProviderID)

	By("a ServiceAccount allowed to read the namespace's ConfigMaps, and a ConfigMap only the consumer has")
	for _, n := range []string{ns, other} {
		Expect(consumer.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "reader"}})).To(Succeed())
		Expect(consumer.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "configmap-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}})).To(Succeed())
		Expect(consumer.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: n, Name: "reader"}}})).To(Succeed())
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "greeting"}, Data: map[string]string{"hello": "from the consumer"}}
	Expect(consumer.Client.Create(ctx, cm)).To(Succeed())

	By("kubectl in an offloaded pod: the consumer's ConfigMap, by its consumer UID")
	logs := runKubectlPod(ctx, ns, "reader", "get", "configmap", "greeting", "-o", "jsonpath={.metadata.uid} {.metadata.namespace}")
	Expect(strings.TrimSpace(logs)).To(Equal(string(cm.UID)+" "+ns), "the pod read the consumer's object, not the provider's copy in %s", twin)
	remote, err := provider.Kube.CoreV1().Pods(twin).Get(ctx, "kubectl", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Spec.NodeName).To(Equal(provider.RealNodes[0].Name), "it ran on the provider's real node")
	Expect(consumer.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubectl"}})).To(Succeed())

	By("the same pod with a token of another namespace's service account: refused by the consumer's authorization")
	tr, err := consumer.Kube.CoreV1().ServiceAccounts(other).CreateToken(ctx, "reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		err := consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubectl"}, &corev1.Pod{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the first pod is gone")
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	// kubectl takes the in-cluster configuration only when no flag sets
	// any of it: with --token, say where the server and its CA are too.
	logs = runKubectlPod(ctx, ns, "reader", "get", "configmaps", "--token", tr.Status.Token,
		"--server", "https://kubernetes.default", "--certificate-authority", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
	Expect(logs).To(ContainSubstring(`User "system:serviceaccount:` + other + `:reader" cannot list resource "configmaps"`))
}

// runKubectlPod runs kubectl with args in a pod of ns as service account sa
// (the namespace is offloaded, so the pod runs in the provider), waits for it
// to end and returns its log, read through the consumer. The pod is named
// kubectl; it must succeed unless args carry --token, whose refusal is the
// point.
func runKubectlPod(ctx context.Context, ns, sa string, args ...string) string {
	GinkgoHelper()
	c := realConsumer
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubectl"},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa, RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{Name: "kubectl", Image: realbed.KubectlImage, ImagePullPolicy: corev1.PullNever,
				Args: args}},
		},
	}
	Expect(c.Client.Create(ctx, pod)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Or(Equal(corev1.PodSucceeded), Equal(corev1.PodFailed)))
	}).WithContext(ctx).WithTimeout(2*time.Minute).Should(Succeed(), "pod %s/%s: %+v", ns, pod.Name, &pod.Status)
	Expect(pod.Spec.NodeName).To(Equal(virtualNodeName(ctx, c, realProviderID)))
	logs, err := c.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred(), string(logs))
	GinkgoWriter.Printf("kubectl %s in the offloaded pod: %s\n%s\n", args[0], pod.Status.Phase, logs)
	if !strings.Contains(strings.Join(args, " "), "--token") {
		Expect(pod.Status.Phase).To(Equal(corev1.PodSucceeded), "kubectl failed:\n%s", logs)
	}
	return string(logs)
}
