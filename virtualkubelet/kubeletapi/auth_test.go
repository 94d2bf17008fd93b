package kubeletapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

func (ca *testCA) client(t *testing.T, cn string, orgs ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

func caConfigMap(bundle string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clientCANamespace, Name: clientCAConfigMap},
		Data: map[string]string{clientCAKey: bundle}}
}

// authFixture is a kubelet API's authorization in front of a handler that
// answers 200, on a fake cluster whose TokenReviews know one token and whose
// SubjectAccessReviews allow nodes/stats of ferry-eu to one user only.
type authFixture struct {
	kube          *fake.Clientset
	server        *Server
	handler       http.Handler
	tokenReviews  atomic.Int32
	accessReviews atomic.Int32
	lastGroups    atomic.Pointer[[]string]
}

func newAuthFixture(t *testing.T, bundle string) *authFixture {
	t.Helper()
	f := &authFixture{kube: fake.NewClientset(caConfigMap(bundle))}
	f.kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "good-token" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:shop:nosy", UID: "u-1", Groups: []string{"system:serviceaccounts"}}}
		}
		return true, tr, nil
	})
	f.kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accessReviews.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		groups := slices.Clone(sar.Spec.Groups)
		f.lastGroups.Store(&groups)
		ra := sar.Spec.ResourceAttributes
		if sar.Spec.User == "kube-apiserver-kubelet-client" && slices.Contains(sar.Spec.Groups, groupAuthenticated) &&
			ra != nil && ra.Resource == "nodes" && ra.Subresource == "stats" && ra.Name == "ferry-eu" && ra.Verb == "get" {
			sar.Status.Allowed = true
		} else {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	s := &Server{cfg: Config{NodeName: "ferry-eu"}}
	s.clientCA, s.authn, s.authz = newAuth(f.kube, wait.Backoff{Steps: 1})
	if err := s.clientCA.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.server = s
	f.handler = s.authorize(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	return f
}

func (f *authFixture) do(certs []*x509.Certificate, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/stats/summary", nil)
	if len(certs) > 0 {
		r.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	return w
}

func TestAuthorizeClientCertificates(t *testing.T) {
	ca, other := newTestCA(t, "cluster-ca"), newTestCA(t, "other-ca")
	f := newAuthFixture(t, ca.pem)

	if w := f.do(nil, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("no credential: %d, want 401", w.Code)
	}
	if w := f.do([]*x509.Certificate{ca.client(t, "kube-apiserver-kubelet-client", "kubeadm:cluster-admins")}, nil); w.Code != http.StatusOK {
		t.Fatalf("API server's client certificate: %d %s, want 200", w.Code, w.Body)
	}
	if g := *f.lastGroups.Load(); !slices.Equal(g, []string{"kubeadm:cluster-admins", groupAuthenticated}) {
		t.Errorf("groups reviewed = %v, want the certificate's organizations and %s", g, groupAuthenticated)
	}
	w := f.do([]*x509.Certificate{other.client(t, "kube-apiserver-kubelet-client")}, nil)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "verifying certificate") {
		t.Errorf("certificate of another CA: %d %q, want 401 naming the verification", w.Code, w.Body)
	}
	if w := f.do([]*x509.Certificate{ca.client(t, "someone")}, nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "user=someone") {
		t.Errorf("certificate of a user without access: %d %q, want 403 naming the user", w.Code, w.Body)
	}

	// The CA follows its ConfigMap: once it names only the other CA, the
	// first CA's certificates no longer authenticate and the other's do.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.server.clientCA.Run(ctx)
	if _, err := f.kube.CoreV1().ConfigMaps(clientCANamespace).Update(ctx, caConfigMap(other.pem), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return f.do([]*x509.Certificate{other.client(t, "kube-apiserver-kubelet-client")}, nil).Code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the other CA's certificate after the ConfigMap changed: %v", err)
	}
	if w := f.do([]*x509.Certificate{ca.client(t, "kube-apiserver-kubelet-client")}, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("the former CA's certificate: %d, want 401", w.Code)
	}
}

func TestAuthorizeBearerTokens(t *testing.T) {
	f := newAuthFixture(t, newTestCA(t, "cluster-ca").pem)
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	for range 3 {
		w := f.do(nil, bearer("good-token"))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "subresource=stats") ||
			!strings.Contains(w.Body.String(), "user=system:serviceaccount:shop:nosy") || !strings.Contains(w.Body.String(), "no RBAC policy matched") {
			t.Fatalf("service account's token: %d %q, want 403 naming the user, the subresource and the reason", w.Code, w.Body)
		}
	}
	if g := *f.lastGroups.Load(); !slices.Equal(g, []string{"system:serviceaccounts", groupAuthenticated}) {
		t.Errorf("groups reviewed = %v, want the token's groups and %s", g, groupAuthenticated)
	}
	if n, m := f.tokenReviews.Load(), f.accessReviews.Load(); n != 1 || m != 1 {
		t.Errorf("three calls with one token sent %d TokenReviews and %d SubjectAccessReviews, want 1 and 1 (cached)", n, m)
	}
	if w := f.do(nil, bearer("bad-token")); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "invalid bearer token") {
		t.Errorf("unknown token: %d %q, want 401", w.Code, w.Body)
	}
	ws := http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"},
		"Sec-Websocket-Protocol": {"v5.channel.k8s.io, " + websocketBearerPrefix + base64.RawURLEncoding.EncodeToString([]byte("good-token"))}}
	if w := f.do(nil, ws); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "user=system:serviceaccount:shop:nosy") {
		t.Errorf("token as a WebSocket subprotocol: %d %q, want the token's user (403)", w.Code, w.Body)
	}
}
