package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
)

var _ = Describe("Metrics serving", Label("security"), Ordered, func() {
	It("serves the controller manager's metrics over HTTPS to authorized clients only", func(ctx context.Context) {
		c := framework.StartClusters(ctx, testbed.Options{Name: "metrics"})[0]
		framework.ApplyManifests(ctx, c, "base")
		ports, err := testbed.FreePorts(1)
		Expect(err).NotTo(HaveOccurred())
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		framework.StartFerry(ctx, c, "metrics", framework.FerryOptions{MetricsAddr: addr})

		// The serving certificate is self-signed: what is tested here is who
		// may read, not the certificate.
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		get := func(g Gomega, scheme, token string) (int, string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/metrics", nil)
			g.Expect(err).NotTo(HaveOccurred())
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := hc.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}

		By("no credential: 401")
		Eventually(func(g Gomega) {
			code, _ := get(g, "https", "")
			g.Expect(code).To(Equal(http.StatusUnauthorized))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		By("plain HTTP: refused")
		Eventually(func(g Gomega) {
			code, _ := get(g, "http", "")
			g.Expect(code).To(Equal(http.StatusBadRequest), "a TLS server answers plain HTTP with 400")
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		By("a service account without the role: 403")
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: metav1.NamespaceDefault}}
		Expect(c.Client.Create(ctx, sa)).To(Succeed())
		tr, err := c.Kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		token := tr.Status.Token
		Eventually(func(g Gomega) {
			code, _ := get(g, "https", token)
			g.Expect(code).To(Equal(http.StatusForbidden))
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())

		By("bound to ferry-metrics-reader: the metrics")
		Expect(c.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper-ferry-metrics"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ferry-metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}})).To(Succeed())
		Eventually(func(g Gomega) {
			code, body := get(g, "https", token)
			g.Expect(code).To(Equal(http.StatusOK))
			g.Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
		}).WithContext(ctx).WithTimeout(60*time.Second).Should(Succeed(), "denials are cached for 30 s")
	})
})
