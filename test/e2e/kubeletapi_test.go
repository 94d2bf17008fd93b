package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/controllers/kubeletcerts"
	"github.com/ferry-io/ferry/test/testbed"
)

// expectKubeletAPI shows kubectl's logs, exec, port-forward and stats working
// on pod, offloaded to provider, through the consumer's API server, which
// verifies the virtual kubelet's serving certificate.
func expectKubeletAPI(ctx context.Context, consumer, provider *testbed.Cluster, ns, pod, nodeName string) {
	GinkgoHelper()
	By("the virtual kubelet's serving certificate was approved by ferry and signed by the cluster CA")
	Eventually(func(g Gomega) {
		var csrs certificatesv1.CertificateSigningRequestList
		g.Expect(consumer.Client.List(ctx, &csrs)).To(Succeed())
		approved := false
		for _, csr := range csrs.Items {
			for _, c := range csr.Status.Conditions {
				if c.Type == certificatesv1.CertificateApproved && c.Reason == kubeletcerts.ReasonApproved &&
					strings.Contains(c.Message, nodeName) && len(csr.Status.Certificate) > 0 {
					approved = true
				}
			}
		}
		g.Expect(approved).To(BeTrue(), "no approved and signed kubelet-serving request for %s", nodeName)
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

	By("kubectl logs")
	Eventually(func(g Gomega) {
		out, err := consumer.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "app"}).DoRaw(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(out)).To(ContainSubstring("kwok pod started"))
	}).WithContext(ctx).WithTimeout(60 * time.Second).Should(Succeed())

	By("kubectl logs -f, following lines written after it started")
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	stream, err := consumer.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "app", Follow: true}).Stream(followCtx)
	Expect(err).NotTo(HaveOccurred())
	defer stream.Close()
	lines := make(chan string, 100)
	go func() {
		defer GinkgoRecover()
		s := bufio.NewScanner(stream)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	marker := "followed-" + rand.String(8)
	Expect(provider.AppendPodLog(marker)).To(Succeed())
	Eventually(lines).WithTimeout(30 * time.Second).Should(Receive(ContainSubstring(marker)))
	stop()

	By("kubectl exec with stdin")
	req := consumer.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"sh", "-c", `read -r line; echo "$line" | tr a-z A-Z; echo exit-ok >&2`},
			Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(consumer.Config, http.MethodPost, req.URL())
	Expect(err).NotTo(HaveOccurred())
	var stdout, stderr bytes.Buffer
	execCtx, cancelExec := context.WithTimeout(ctx, 30*time.Second)
	defer cancelExec()
	Expect(exec.StreamWithContext(execCtx, remotecommand.StreamOptions{
		Stdin: strings.NewReader("hello from the consumer\n"), Stdout: &stdout, Stderr: &stderr,
	})).To(Succeed(), "stderr: %s", stderr.String())
	Expect(stdout.String()).To(Equal("HELLO FROM THE CONSUMER\n"))
	Expect(stderr.String()).To(Equal("exit-ok\n"))

	By("kubectl exec of a failing command fails")
	req = consumer.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: []string{"sh", "-c", "exit 3"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err = remotecommand.NewSPDYExecutor(consumer.Config, http.MethodPost, req.URL())
	Expect(err).NotTo(HaveOccurred())
	err = exec.StreamWithContext(execCtx, remotecommand.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	// kwok reports a command's exit as an internal error, not an exit code
	// (a kubelet's exit code is carried through as it is).
	Expect(err).To(MatchError(ContainSubstring("exit status 3")))

	By("kubectl port-forward")
	transport, upgrader, err := spdy.RoundTripperFor(consumer.Config)
	Expect(err).NotTo(HaveOccurred())
	pfURL := consumer.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, pfURL)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	defer close(stopCh)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stopCh, readyCh, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		_ = fw.ForwardPorts()
	}()
	Eventually(readyCh).WithTimeout(30 * time.Second).Should(BeClosed())
	ports, err := fw.GetPorts()
	Expect(err).NotTo(HaveOccurred())
	for i := range 2 { // two connections: each gets its own stream pair
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local), 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		msg := fmt.Sprintf("ping %d through ferry\n", i)
		_, err = conn.Write([]byte(msg))
		Expect(err).NotTo(HaveOccurred())
		Expect(conn.SetReadDeadline(time.Now().Add(20 * time.Second))).To(Succeed())
		got, err := bufio.NewReader(conn).ReadString('\n')
		Expect(err).NotTo(HaveOccurred())
		Expect(got).To(Equal(msg), "the provider's pod echoes what it is sent")
		Expect(conn.Close()).To(Succeed())
	}

	var node corev1.Node
	Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: nodeName}, &node)).To(Succeed())
	kubeletURL := fmt.Sprintf("https://%s:%d", node.Status.Addresses[0].Address, node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	roots := x509.NewCertPool()
	Expect(roots.AppendCertsFromPEM(consumer.Config.CAData)).To(BeTrue())

	By("the node's stats summary lists the pod, for the API server's kubelet client certificate")
	// kube-apiserver refuses nodes/proxy to loopback addresses, and every
	// node of the test bed is on 127.0.0.1; so the stats endpoints are
	// called as the API server calls them, with its kubelet client
	// certificate, verifying the serving certificate with the cluster CA.
	apiClientCert, err := tls.LoadX509KeyPair(filepath.Join(consumer.Dir, "apiserver-kubelet-client.crt"), filepath.Join(consumer.Dir, "apiserver-kubelet-client.key"))
	Expect(err).NotTo(HaveOccurred())
	asAPIServer := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{apiClientCert}, MinVersion: tls.VersionTLS12}}}
	get := func(path string) []byte {
		GinkgoHelper()
		resp, err := asAPIServer.Get(kubeletURL + path)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
		return body
	}
	var summary statsv1alpha1.Summary
	Expect(json.Unmarshal(get("/stats/summary"), &summary)).To(Succeed())
	Expect(summary.Node.NodeName).To(Equal(nodeName))
	Expect(summary.Pods).To(ContainElement(And(
		HaveField("PodRef.Name", pod), HaveField("PodRef.Namespace", ns),
		HaveField("Containers", ContainElement(HaveField("Name", "app"))),
	)))
	Expect(string(get("/metrics/resource"))).To(ContainSubstring("container_start_time_seconds{container=\"app\",namespace=\"" + ns + "\",pod=\"" + pod + "\"}"))

	By("the kubelet API refuses unauthenticated calls")
	// The serving certificate is valid for the node's address under the cluster CA.
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}, Timeout: 10 * time.Second}
	resp, err := anonymous.Get(kubeletURL + "/stats/summary")
	Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))

	By("the kubelet API authenticates a service account's token and forbids it nodes/stats")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nosy", Namespace: ns}}
	Expect(consumer.Client.Create(ctx, sa)).To(Succeed())
	tr, err := consumer.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "nosy", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, kubeletURL+"/stats/summary", nil)
	Expect(err).NotTo(HaveOccurred())
	r.Header.Set("Authorization", "Bearer "+tr.Status.Token)
	resp, err = anonymous.Do(r)
	Expect(err).NotTo(HaveOccurred())
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusForbidden), string(body))
	Expect(string(body)).To(ContainSubstring("subresource=stats"))
}
