// Command ferry-webhook serves ferry's admission webhooks: offloading policy
// for pods, PVC remapping to the virtual storage class, validation of
// ferry.io/ annotations and NamespaceOffloadings, and ShadowPod identity and
// PeeringQuota checks on providers.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ferry-io/ferry/cmd/ferry-webhook/app"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/webhooks"
)

func main() {
	var f app.Flags
	fs, showVersion := app.NewFlagSet(&f, pflag.ExitOnError)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-webhook")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-webhook"))

	if err := run(f.Kubeconfig, f.CertSecret, f.QPS, f.Burst, f.Opts); err != nil {
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
