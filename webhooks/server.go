package webhooks

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/quota"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/webhooks/certrotator"
)

// Paths the webhooks are served at; manifests/webhook names them.
const (
	PathMutatePod                   = "/mutate-pod"
	PathValidatePod                 = "/validate-pod"
	PathWarnPod                     = "/warn-pod"
	PathRuntimeClassPod             = "/runtimeclass-pod"
	PathMutatePVC                   = "/mutate-pvc"
	PathValidatePVC                 = "/validate-pvc"
	PathValidateNamespaceOffloading = "/validate-namespaceoffloading"
	PathValidateShadowPod           = "/validate-shadowpod"
)

// ConfigurationName is the name of both ferry's MutatingWebhookConfiguration
// and its ValidatingWebhookConfiguration.
const ConfigurationName = "ferry-webhook"

// Options configure ferry-webhook.
type Options struct {
	// Host and Port the webhook server listens on.
	Host string
	Port int
	// SelfSignedCerts: manage the serving certificate (CA and certificate in
	// CertSecret, CA bundle injected into the configurations). When false,
	// the certificate is read from CertDir (tls.crt, tls.key), e.g. mounted
	// from a cert-manager Certificate, and the CA bundle is left to
	// cert-manager's CA injector.
	SelfSignedCerts bool
	CertSecret      client.ObjectKey
	CertDNSNames    []string
	CertIPs         []string
	CertDir         string
	// Configurations to inject the CA bundle into (ConfigurationName when
	// empty).
	MutatingConfigurations, ValidatingConfigurations []string
	MetricsAddr, HealthAddr                          string
	// MetricsSecure serves metrics over HTTPS to authenticated and
	// authorized clients only.
	MetricsSecure bool
}

// NewManager returns a manager serving every ferry webhook (it caches only
// what policy reads: NamespaceOffloadings, PeeringQuotas, Namespaces and
// StorageClasses; pods and PVCs come in the requests); it is ready
// (readyz) once its caches are synced and, with SelfSignedCerts, the CA
// bundle is injected.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if opts.Port <= 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("--port %d: must be within 1-65535", opts.Port)
	}
	serverOpts := webhook.Options{Host: opts.Host, Port: opts.Port, CertDir: opts.CertDir}
	var rotator *certrotator.Rotator
	if opts.SelfSignedCerts {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("build clientset: %w", err)
		}
		ips, err := parseIPs(opts.CertIPs)
		if err != nil {
			return nil, err
		}
		rotator = &certrotator.Rotator{
			Client:          kube,
			SecretNamespace: opts.CertSecret.Namespace, SecretName: opts.CertSecret.Name,
			DNSNames: opts.CertDNSNames, IPAddresses: ips,
			MutatingWebhookConfigurations:   orDefault(opts.MutatingConfigurations),
			ValidatingWebhookConfigurations: orDefault(opts.ValidatingConfigurations),
		}
		serverOpts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate }}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 ferryscheme.Scheme(),
		WebhookServer:          webhook.NewServer(serverOpts),
		Metrics:                metricsOptions(opts.MetricsAddr, opts.MetricsSecure),
		HealthProbeBindAddress: opts.HealthAddr,
	})
	if err != nil {
		return nil, fmt.Errorf("build manager: %w", err)
	}
	if err := quota.IndexConsumer(ctx, mgr); err != nil {
		return nil, fmt.Errorf("index PeeringQuotas by consumer: %w", err)
	}
	if rotator != nil {
		if err := mgr.Add(rotator); err != nil {
			return nil, fmt.Errorf("add certificate rotator: %w", err)
		}
	}
	Register(mgr)
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", readiness(mgr, rotator)); err != nil {
		return nil, fmt.Errorf("add readiness check: %w", err)
	}
	return mgr, nil
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=update;patch,resourceNames=ferry-webhook
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=ferry.io,resources=namespaceoffloadings,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas/status,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Register serves ferry's webhooks on mgr's webhook server.
func Register(mgr ctrl.Manager) {
	srv := mgr.GetWebhookServer()
	dec := admission.NewDecoder(mgr.GetScheme())
	c := mgr.GetClient()
	srv.Register(PathMutatePod, &webhook.Admission{Handler: &PodMutator{Reader: c}})
	srv.Register(PathValidatePod, &webhook.Admission{Handler: &AnnotationValidator{Kind: "Pod", Reader: c, Decoder: dec}})
	srv.Register(PathWarnPod, &webhook.Admission{Handler: &PodAnnotationWarner{Reader: c}})
	srv.Register(PathRuntimeClassPod, &webhook.Admission{Handler: &PodRuntimeClassGuard{}})
	srv.Register(PathMutatePVC, &webhook.Admission{Handler: &PVCMutator{Reader: c, Decoder: dec}})
	srv.Register(PathValidatePVC, &webhook.Admission{Handler: &AnnotationValidator{Kind: "PersistentVolumeClaim", Reader: c, Decoder: dec}})
	srv.Register(PathValidateNamespaceOffloading, &webhook.Admission{Handler: &NamespaceOffloadingValidator{Decoder: dec}})
	srv.Register(PathValidateShadowPod, &webhook.Admission{Handler: &ShadowPodValidator{Reader: c, APIReader: mgr.GetAPIReader(), Writer: c, Decoder: dec}})
}

// readiness: caches of what policy reads are synced, the server serves and
// (self-signed) the CA bundle is injected.
func readiness(mgr ctrl.Manager, rotator *certrotator.Rotator) healthz.Checker {
	started := mgr.GetWebhookServer().StartedChecker()
	kinds := []client.Object{&ferryv1alpha1.NamespaceOffloading{}, &ferryv1alpha1.PeeringQuota{}, &corev1.Namespace{}, &storagev1.StorageClass{}}
	return func(req *http.Request) error {
		if rotator != nil {
			select {
			case <-rotator.Ready():
			default:
				return fmt.Errorf("serving certificate not ready")
			}
		}
		for _, k := range kinds {
			inf, err := mgr.GetCache().GetInformer(req.Context(), k, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !inf.HasSynced() {
				return fmt.Errorf("cache of %T not synced", k)
			}
		}
		return started(req)
	}
}

func parseIPs(in []string) ([]net.IP, error) {
	out := make([]net.IP, 0, len(in))
	for _, s := range in {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("--cert-ip-addresses: %q is not an IP address", s)
		}
		out = append(out, ip)
	}
	return out, nil
}

func orDefault(names []string) []string {
	if len(names) == 0 {
		return []string{ConfigurationName}
	}
	return names
}

// ParseSecretRef parses --cert-secret's namespace/name.
func ParseSecretRef(s string) (client.ObjectKey, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, fmt.Errorf("--cert-secret %q: want namespace/name", s)
	}
	for _, part := range []string{ns, name} {
		if errs := validation.IsDNS1123Subdomain(part); len(errs) > 0 {
			return client.ObjectKey{}, fmt.Errorf("--cert-secret %q: %q: %s", s, part, errs[0])
		}
	}
	return client.ObjectKey{Namespace: ns, Name: name}, nil
}

// Authenticating and authorizing metrics clients:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves metrics at addr; secure, over HTTPS (a self-signed
// certificate) to clients the API server authenticates and authorizes for
// GET /metrics.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}
