package node

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: p
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: abc
contexts:
- name: c
  context: {cluster: p, user: u}
current-context: c
`

func TestProviderConfig(t *testing.T) {
	vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "provider-a"}}
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "creds"}, Data: data}
	}
	cfg, err := ProviderConfig(vn, secret(map[string][]byte{"kubeconfig": []byte(testKubeconfig)}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "abc" {
		t.Errorf("config = host %q token %q", cfg.Host, cfg.BearerToken)
	}

	_, err = ProviderConfig(vn, secret(map[string][]byte{"config": []byte(testKubeconfig)}))
	if err == nil || !strings.Contains(err.Error(), `secret ferry-system/creds`) || !strings.Contains(err.Error(), `no key "kubeconfig"`) {
		t.Errorf("missing key: %v, want an error naming the secret and the key", err)
	}
	_, err = ProviderConfig(vn, secret(map[string][]byte{"kubeconfig": []byte("clusters: [")}))
	if err == nil || !strings.Contains(err.Error(), `key "kubeconfig" of secret ferry-system/creds`) {
		t.Errorf("malformed kubeconfig: %v, want an error naming the secret and the key", err)
	}
}

func TestFailedChecks(t *testing.T) {
	body := []byte("[+]ping ok\n[-]etcd failed: reason withheld\n[+]log ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n")
	got := failedChecks(body)
	if strings.Join(got, ",") != "etcd,poststarthook/rbac/bootstrap-roles" {
		t.Errorf("failedChecks = %q", got)
	}
}

func TestProbe(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		switch code := int(status.Load()); code {
		case 0:
			time.Sleep(time.Second)
		case http.StatusOK:
			_, _ = w.Write([]byte("ok"))
		default:
			w.WriteHeader(code)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"))
		}
	}))
	t.Cleanup(srv.Close)
	p, err := newProber(&rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.probe(t.Context()); err != nil {
		t.Errorf("ready server: %v", err)
	}
	status.Store(http.StatusInternalServerError)
	if err := p.probe(t.Context()); err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "failed checks: etcd") {
		t.Errorf("unready server: %v, want the status and failed checks", err)
	}
	status.Store(0)
	if err := p.probe(t.Context()); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow server: %v, want a deadline error", err)
	}
	srv.Close()
	if err := p.probe(t.Context()); err == nil {
		t.Error("closed server: no error")
	}
}

// FuzzProviderConfig: whatever the credentials Secret holds, building the
// provider's config never panics, and a refusal names the Secret and key.
func FuzzProviderConfig(f *testing.F) {
	f.Add([]byte(testKubeconfig))
	f.Add([]byte("apiVersion: v1\nkind: Config\n"))
	f.Add([]byte("{"))
	f.Add([]byte{})
	vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "vn"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ferry-system", Name: "cred"},
			Data: map[string][]byte{ferryv1alpha1.KubeconfigSecretKey: data}}
		cfg, err := ProviderConfig(vn, secret)
		switch {
		case err != nil && !strings.Contains(err.Error(), "ferry-system/cred") || err != nil && !strings.Contains(err.Error(), `"kubeconfig"`):
			t.Fatalf("error does not name the Secret and key: %v", err)
		case err == nil && cfg == nil:
			t.Fatal("no config and no error")
		}
	})
}
