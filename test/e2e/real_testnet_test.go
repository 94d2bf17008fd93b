package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
	"github.com/ferry-io/ferry/cmd/ferryctl/app"
	"github.com/ferry-io/ferry/fabric/nettest"
	"github.com/ferry-io/ferry/test/testbed"
)

// testNetwork runs `ferryctl test network` on the consumer in this process
// with the test bed's agnhost image and args, and returns its stdout and
// stderr apart (progress goes to stderr, the report to stdout).
func testNetwork(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := app.NewCommand()
	cmd.SetArgs(append([]string{"test", "network", "--kubeconfig", realConsumer.KubeconfigPath,
		"--image", testbed.AgnhostImage, "--image-pull-policy", "Never"}, args...))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	start := time.Now()
	err = cmd.ExecuteContext(ctx)
	GinkgoWriter.Printf("ferryctl test network %s: %v in %s\n%s\n%s\n", strings.Join(args, " "), err, time.Since(start).Round(time.Second), errOut.String(), out.String())
	return out.String(), errOut.String(), err
}

// parseReport reads the -o json report.
func parseReport(stdout string) *nettest.Report {
	GinkgoHelper()
	var r nettest.Report
	Expect(json.Unmarshal([]byte(stdout), &r)).To(Succeed(), stdout)
	return &r
}

// expectNothingLeft checks no namespace, offloading or twin of a run is left
// in either cluster.
func expectNothingLeft(ctx context.Context) {
	GinkgoHelper()
	var nss corev1.NamespaceList
	Expect(realConsumer.Client.List(ctx, &nss, client.HasLabels{nettest.LabelRun})).To(Succeed())
	Expect(nss.Items).To(BeEmpty(), "namespaces of a run left in the consumer")
	var nsos ferryv1alpha1.NamespaceOffloadingList
	Expect(realConsumer.Client.List(ctx, &nsos, client.HasLabels{nettest.LabelRun})).To(Succeed())
	Expect(nsos.Items).To(BeEmpty())
	Eventually(func(g Gomega) {
		var all corev1.NamespaceList
		g.Expect(realProvider.Client.List(ctx, &all)).To(Succeed())
		for _, ns := range all.Items {
			g.Expect(ns.Name).NotTo(ContainSubstring("ferry-test-network-"), "a twin of a run left in the provider")
		}
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// cancelOn is a writer that cancels when what was written contains s.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	s      string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.s) {
		w.cancel()
	}
	return len(p), nil
}

// realTestNetwork: `ferryctl test network` passes every check on the healthy
// bed and removes a leftover of a killed run; with the consumer's gateway
// scaled to 0 every cross-cluster check fails naming the gateway, the
// in-cluster ones pass; with the gateway back, interrupted (as by Ctrl-C)
// at its last check, the checks before it passed and it cleans up.
func realTestNetwork(ctx context.Context) {
	consumer := realConsumer
	By("a healthy fabric: every check passes; a leftover of a killed run is removed")
	leftover := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ferry-test-network-killed", Labels: map[string]string{nettest.LabelRun: "killed"},
		Annotations: map[string]string{nettest.AnnotationExpires: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}}}
	Expect(consumer.Client.Create(ctx, leftover)).To(Succeed())
	out, stderr, err := testNetwork(ctx, "--check-timeout", "30s")
	Expect(err).NotTo(HaveOccurred(), out)
	Expect(stderr).To(ContainSubstring("Removing namespace ferry-test-network-killed, left by an earlier run."))
	for _, p := range []nettest.Path{nettest.PathPod, nettest.PathService, nettest.PathAPIServer, nettest.PathMTU, nettest.PathLarge} {
		Expect(out).To(ContainSubstring(string(p)))
	}
	Expect(out).NotTo(ContainSubstring("FAIL"))
	expectNothingLeft(ctx)

	By("the consumer's gateway scaled to 0: cross-cluster checks fail naming it, in-cluster ones pass")
	gw := client.ObjectKey{Namespace: charts.Namespace, Name: nettest.GatewayDeployment}
	replicas := scaleDeployment(ctx, consumer, gw, 0)
	restored := false
	defer func() {
		if !restored {
			scaleDeployment(context.WithoutCancel(ctx), consumer, gw, replicas)
		}
	}()
	Eventually(func(g Gomega) {
		pods, err := consumer.Kube.CoreV1().Pods(charts.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ferry-gateway"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods.Items).To(BeEmpty())
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	out, _, err = testNetwork(ctx, "-o", "json", "--check-timeout", "5s")
	Expect(err).To(MatchError(ContainSubstring("checks failed")))
	r := parseReport(out)
	Expect(r.Passed).To(BeFalse())
	cross := 0
	for _, c := range r.Checks {
		if c.Cross {
			cross++
			Expect(c.Passed).To(BeFalse(), "%s %s → %s", c.Path, c.From, c.To)
			Expect(c.Cause).To(Equal(nettest.CauseGatewayDown), "%s %s → %s: %s", c.Path, c.From, c.To, c.Detail)
			Expect(c.Detail).To(ContainSubstring("ferry-gateway Deployment"))
		} else {
			Expect(c.Passed).To(BeTrue(), "in-cluster %s %s → %s: %s %s", c.Path, c.From, c.To, c.Cause, c.Detail)
		}
	}
	Expect(cross).To(BeNumerically(">=", 9), "every cross-cluster path both ways")
	expectNothingLeft(ctx)

	By("the gateway restored; interrupted (as by Ctrl-C) at its last check, the checks before it pass, and it removes what it made")
	scaleDeployment(ctx, consumer, gw, replicas)
	restored = true
	expectFerryPodsReady(ctx, consumer)
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	last := "Checking " + string(nettest.PathLarge) + " " + string(realProviderID)
	w := &cancelOn{s: last, cancel: cancel}
	cmd := app.NewCommand()
	cmd.SetArgs([]string{"test", "network", "--kubeconfig", consumer.KubeconfigPath, "--image", testbed.AgnhostImage, "--image-pull-policy", "Never",
		"-o", "json", "--check-timeout", "60s"})
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(w)
	err = cmd.ExecuteContext(ictx)
	GinkgoWriter.Printf("interrupted run: %v\n%s\n%s\n", err, w.buf.String(), stdout.String())
	Expect(err).To(MatchError(ContainSubstring("interrupted")))
	Expect(w.buf.String()).To(ContainSubstring("Removed namespace ferry-test-network-"))
	r = parseReport(stdout.String())
	Expect(r.Checks).To(HaveLen(12))
	for _, c := range r.Checks[:len(r.Checks)-1] {
		Expect(c.Passed).To(BeTrue(), "%s %s → %s: %s %s", c.Path, c.From, c.To, c.Cause, c.Detail)
		Expect(c.Latency).NotTo(BeEmpty(), "%s %s → %s: passed but not timed", c.Path, c.From, c.To)
	}
	Expect(r.Checks[len(r.Checks)-1]).To(And(HaveField("Passed", false), HaveField("Cause", nettest.CauseProbe), HaveField("Detail", ContainSubstring("interrupted"))))
	expectNothingLeft(ctx)
}

// scaleDeployment sets a Deployment's replicas and returns the old count.
func scaleDeployment(ctx context.Context, c *testbed.Cluster, key client.ObjectKey, replicas int32) int32 {
	GinkgoHelper()
	s, err := c.Kube.AppsV1().Deployments(key.Namespace).GetScale(ctx, key.Name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	old := s.Spec.Replicas
	s.Spec.Replicas = replicas
	_, err = c.Kube.AppsV1().Deployments(key.Namespace).UpdateScale(ctx, key.Name, s, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return old
}
