package peering

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ErrNotPeered says this cluster has no (live) peering with a provider: no
// ForeignCluster with role Provider for its ClusterID, or one being deleted.
// The provider then cleans up the consumer's tenant on its own.
var ErrNotPeered = errors.New("not peered")

// Provider is a consumer's client for one provider, as the credential the
// provider issued allows: its tenant namespace and the twin namespaces the
// provider makes for it.
type Provider struct {
	// Config is the rest config built from the credential.
	Config *rest.Config
	// Kube is a clientset, for discovery and probes.
	Kube kubernetes.Interface
	// Client knows core and ferry kinds.
	Client client.Client
	// TenantNamespace is the consumer's tenant namespace on the provider,
	// from the credential's current context.
	TenantNamespace string
}

// ProviderClients hands out the clients for each provider this cluster peers
// with, built once per credential version, so every controller talking to a
// provider shares one connection pool and one rate limit, and a renewed
// credential is picked up by all of them.
type ProviderClients struct {
	reader   client.Reader
	qps      float32
	burst    int
	mu       sync.Mutex
	byFCName map[string]cachedProvider
}

type cachedProvider struct {
	secretVersion string
	provider      *Provider
}

// NewProviderClients returns clients for providers whose credentials reader
// (the manager's cache) reads; qps and burst bound the requests to each
// provider.
func NewProviderClients(reader client.Reader, qps float32, burst int) *ProviderClients {
	return &ProviderClients{reader: reader, qps: qps, burst: burst, byFCName: map[string]cachedProvider{}}
}

// For returns the clients for the provider of a consumer-side ForeignCluster;
// the same *Provider until its credentials Secret changes.
func (p *ProviderClients) For(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) (*Provider, error) {
	ref := fc.Spec.CredentialsSecretRef
	if ref == nil {
		return nil, errors.New("spec.credentialsSecretRef is not set")
	}
	var secret corev1.Secret
	if err := p.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		return nil, fmt.Errorf("read credentials Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.byFCName[fc.Name]; ok && c.secretVersion == secret.ResourceVersion {
		return c.provider, nil
	}
	prov, err := providerFromKubeconfig(secret.Data[ferryv1alpha1.KubeconfigSecretKey], fmt.Sprintf("Secret %s/%s key %q", ref.Namespace, ref.Name, ferryv1alpha1.KubeconfigSecretKey), p.qps, p.burst)
	if err != nil {
		return nil, err
	}
	p.byFCName[fc.Name] = cachedProvider{secretVersion: secret.ResourceVersion, provider: prov}
	return prov, nil
}

// ForCluster returns the clients for the provider with ClusterID id, or an
// error wrapping ErrNotPeered when this cluster does not peer with it.
func (p *ProviderClients) ForCluster(ctx context.Context, id ferryv1alpha1.ClusterID) (*Provider, error) {
	var fcs ferryv1alpha1.ForeignClusterList
	if err := p.reader.List(ctx, &fcs); err != nil {
		return nil, fmt.Errorf("list ForeignClusters: %w", err)
	}
	for i := range fcs.Items {
		fc := &fcs.Items[i]
		if fc.Spec.ClusterID == id && isProvider(fc) && fc.DeletionTimestamp.IsZero() {
			return p.For(ctx, fc)
		}
	}
	return nil, fmt.Errorf("provider %s: %w", id, ErrNotPeered)
}

// Forget drops the clients of a ForeignCluster (unpeered).
func (p *ProviderClients) Forget(fcName string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byFCName, fcName)
}

// providerFromKubeconfig builds provider clients from a kubeconfig whose
// current context names the tenant namespace; where says where it came from.
func providerFromKubeconfig(data []byte, where string, qps float32, burst int) (*Provider, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: no kubeconfig", where)
	}
	cc, err := clientcmd.NewClientConfigFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" || ns == metav1.NamespaceDefault {
		return nil, fmt.Errorf("%s: the current context must name the tenant namespace", where)
	}
	cfg.QPS, cfg.Burst = qps, burst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &Provider{Config: cfg, Kube: kube, Client: c, TenantNamespace: ns}, nil
}
