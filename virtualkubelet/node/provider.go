package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ProviderConfig builds the rest.Config of the provider behind vn from its
// credentials Secret (spec.kubeconfigSecretRef, key "kubeconfig").
func ProviderConfig(vn *ferryv1alpha1.VirtualNode, secret *corev1.Secret) (*rest.Config, error) {
	ref := secret.Namespace + "/" + secret.Name
	data, ok := secret.Data[ferryv1alpha1.KubeconfigSecretKey]
	if !ok || len(data) == 0 {
		return nil, fmt.Errorf("secret %s (spec.kubeconfigSecretRef of virtual node %s/%s) has no key %q", ref, vn.Namespace, vn.Name, ferryv1alpha1.KubeconfigSecretKey)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("parse key %q of secret %s as a kubeconfig: %w", ferryv1alpha1.KubeconfigSecretKey, ref, err)
	}
	return cfg, nil
}

// wrapProviderTransport, when set (by tests), wraps the transport of the
// provider probe, e.g. to count its requests.
var wrapProviderTransport func(http.RoundTripper) http.RoundTripper

// prober probes a provider API server's /readyz.
type prober struct {
	client  *http.Client
	url     string
	timeout time.Duration
}

func newProber(provider *rest.Config, timeout time.Duration) (*prober, error) {
	cfg := rest.CopyConfig(provider)
	cfg.UserAgent = rest.DefaultKubernetesUserAgent() + " ferry-virtual-kubelet/health-check"
	if wrapProviderTransport != nil {
		cfg.Wrap(wrapProviderTransport)
	}
	base, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("provider API server address %q: %w", provider.Host, err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build client of provider API server %s: %w", provider.Host, err)
	}
	return &prober{client: client, url: base.JoinPath("readyz").String(), timeout: timeout}, nil
}

// probe returns nil when the provider API server answers /readyz with 200
// within the timeout; otherwise the error says why, with the failed checks.
func (p *prober) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("GET /readyz: %s: the provider refused the credential (revoked or expired; `ferryctl peer --reissue-credential` issues a new one)", resp.Status)
	case resp.StatusCode != http.StatusOK:
		if failed := failedChecks(body); len(failed) > 0 {
			return fmt.Errorf("GET /readyz: %s, failed checks: %s", resp.Status, strings.Join(failed, ", "))
		}
		return fmt.Errorf("GET /readyz: %s", resp.Status)
	case err != nil:
		return fmt.Errorf("GET /readyz: read answer: %w", err)
	}
	return nil
}

// failedChecks are the names of the failed checks in a verbose /readyz
// answer ("[-]etcd failed: reason withheld").
func failedChecks(body []byte) []string {
	var failed []string
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(line, "[-]"); ok {
			name, _, _ := strings.Cut(rest, " ")
			failed = append(failed, name)
		}
	}
	return failed
}
