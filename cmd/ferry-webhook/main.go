// Command ferry-webhook serves ferry's admission webhooks: offloading policy
// for pods, PVC remapping to the virtual storage class, validation of
// ferry.io/ annotations and NamespaceOffloadings, and ShadowPod identity and
// PeeringQuota checks on providers.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/webhooks"
)

func main() {
	var (
		kubeconfig, secret string
		qps                float32
		burst              int
		opts               webhooks.Options
	)
	fs := pflag.NewFlagSet("ferry-webhook", pflag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&opts.Host, "bind-address", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&opts.Port, "port", 9443, "port the webhook server listens on")
	fs.BoolVar(&opts.SelfSignedCerts, "self-signed-certs", true, "manage the serving certificate and inject its CA into the webhook configurations; false: read tls.crt/tls.key from --cert-dir (e.g. cert-manager)")
	fs.StringVar(&secret, "cert-secret", ferryv1alpha1.SystemNamespace+"/ferry-webhook-certs", "namespace/name of the Secret holding the self-signed CA and serving certificate")
	fs.StringSliceVar(&opts.CertDNSNames, "cert-dns-names", []string{"ferry-webhook.ferry-system.svc", "ferry-webhook.ferry-system.svc.cluster.local"}, "DNS names of the serving certificate (the webhook Service's)")
	fs.StringSliceVar(&opts.CertIPs, "cert-ip-addresses", nil, "IP addresses of the serving certificate (for URL-based configurations)")
	fs.StringVar(&opts.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key when --self-signed-certs=false")
	fs.StringSliceVar(&opts.MutatingConfigurations, "mutating-configurations", []string{webhooks.ConfigurationName}, "MutatingWebhookConfigurations to inject the CA bundle into")
	fs.StringSliceVar(&opts.ValidatingConfigurations, "validating-configurations", []string{webhooks.ConfigurationName}, "ValidatingWebhookConfigurations to inject the CA bundle into")
	fs.Float32Var(&qps, "kube-api-qps", 50, "queries per second to this cluster's API server")
	fs.IntVar(&burst, "kube-api-burst", 100, "burst of queries to this cluster's API server")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	showVersion := version.AddFlag(fs)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-webhook")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-webhook"))

	if err := run(kubeconfig, secret, qps, burst, opts); err != nil {
		fmt.Fprintln(os.Stderr, "ferry-webhook:", err)
		os.Exit(1)
	}
}

func run(kubeconfigPath, secret string, qps float32, burst int, opts webhooks.Options) error {
	cfg, err := kubeconfig.ForComponent("--kubeconfig", kubeconfigPath)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = qps, burst
	if opts.CertSecret, err = webhooks.ParseSecretRef(secret); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := webhooks.NewManager(ctx, cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
