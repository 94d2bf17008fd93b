// Package app holds ferry-webhook's command line: every flag the binary
// parses, importable so that hack/docgen documents exactly these.
package app

import (
	"flag"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/webhooks"
)

// Name is the binary's name.
const Name = "ferry-webhook"

// Flags are the values of ferry-webhook's own flags.
type Flags struct {
	Kubeconfig, CertSecret string
	QPS                    float32
	Burst                  int
	Opts                   webhooks.Options
}

// NewFlagSet is the binary's whole command line: its own flags (into f),
// klog's and --version.
func NewFlagSet(f *Flags, errorHandling pflag.ErrorHandling) (*pflag.FlagSet, version.Flag) {
	fs := pflag.NewFlagSet(Name, errorHandling)
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&f.Opts.Host, "bind-address", "", "address the webhook server listens on (empty: all)")
	fs.IntVar(&f.Opts.Port, "port", 9443, "port the webhook server listens on")
	fs.BoolVar(&f.Opts.SelfSignedCerts, "self-signed-certs", true, "manage the serving certificate and inject its CA into the webhook configurations; false: read tls.crt/tls.key from --cert-dir (e.g. cert-manager)")
	fs.StringVar(&f.CertSecret, "cert-secret", ferryv1alpha1.SystemNamespace+"/ferry-webhook-certs", "namespace/name of the Secret holding the self-signed CA and serving certificate")
	fs.StringSliceVar(&f.Opts.CertDNSNames, "cert-dns-names", []string{"ferry-webhook.ferry-system.svc", "ferry-webhook.ferry-system.svc.cluster.local"}, "DNS names of the serving certificate (the webhook Service's)")
	fs.StringSliceVar(&f.Opts.CertIPs, "cert-ip-addresses", nil, "IP addresses of the serving certificate (for URL-based configurations)")
	fs.StringVar(&f.Opts.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "folder with tls.crt and tls.key when --self-signed-certs=false")
	fs.StringSliceVar(&f.Opts.MutatingConfigurations, "mutating-configurations", []string{webhooks.ConfigurationName}, "MutatingWebhookConfigurations to inject the CA bundle into")
	fs.StringSliceVar(&f.Opts.ValidatingConfigurations, "validating-configurations", []string{webhooks.ConfigurationName}, "ValidatingWebhookConfigurations to inject the CA bundle into")
	fs.Float32Var(&f.QPS, "kube-api-qps", 50, "queries per second to this cluster's API server")
	fs.IntVar(&f.Burst, "kube-api-burst", 100, "burst of queries to this cluster's API server")
	fs.StringVar(&f.Opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&f.Opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&f.Opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return fs, version.AddFlag(fs)
}
