// Command ferry-controller-manager runs ferry's controllers in one cluster:
// tenants and grants for the consumers it serves, peers and virtual nodes for
// the providers it uses.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/cmd/ferry-controller-manager/app"
	"github.com/ferry-io/ferry/controllers/controllermanager"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/version"
)

func main() {
	var f app.Flags
	fs, showVersion := app.NewFlagSet(&f, pflag.ExitOnError)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-controller-manager")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-controller-manager"))

	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "ferry-controller-manager:", err)
		os.Exit(1)
	}
}

func run(f app.Flags) error {
	cfg, err := kubeconfig.ForComponent("--kubeconfig", f.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = f.QPS, f.Burst
	if f.Opts.Network.Disabled {
		// The virtual kubelets then pass pod addresses unchanged too.
		f.VKArgs = append(f.VKArgs, "--disable-network")
	}
	if f.Opts.Launcher, err = newLauncher(f, cfg); err != nil {
		return err
	}
	if l, ok := f.Opts.Launcher.(*peering.ProcessLauncher); ok {
		// On the way out, the virtual kubelets stop with a SIGTERM (they would
		// otherwise die with this process, killed).
		defer l.StopAll(context.Background())
	}
	f.Opts.ClusterID = ferryv1alpha1.ClusterID(f.ClusterID)
	switch p := corev1.PullPolicy(f.MoverPullPolicy); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		f.Opts.VolumeMoverPullPolicy = p
	default:
		return fmt.Errorf("--volume-mover-image-pull-policy %q: must be Always, IfNotPresent or Never", f.MoverPullPolicy)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllermanager.New(ctx, cfg, f.Opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newLauncher is the virtual kubelet launcher of --virtual-kubelet-mode.
// In deployment mode --virtual-kubelet-image may be empty: a cluster that
// only provides runs no virtual kubelet, and the launcher fails, naming
// the flag, only when this cluster consumes.
func newLauncher(f app.Flags, cfg *rest.Config) (peering.VirtualKubeletLauncher, error) {
	switch f.VKMode {
	case "process":
		return &peering.ProcessLauncher{Binary: f.VKBinary, Kubeconfig: f.Kubeconfig, LogDir: f.VKLogDir, ExtraArgs: f.VKArgs}, nil
	case "deployment":
		switch corev1.PullPolicy(f.VKPullPolicy) {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			return nil, fmt.Errorf("--virtual-kubelet-image-pull-policy %q: must be Always, IfNotPresent or Never", f.VKPullPolicy)
		}
		for _, name := range f.VKPullSecrets {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return nil, fmt.Errorf("--virtual-kubelet-image-pull-secret %q: %s", name, strings.Join(errs, "; "))
			}
		}
		if f.VKImage == "" {
			klog.InfoS("No --virtual-kubelet-image: this cluster can provide to peers; consuming a provider fails until the manager is restarted with one")
		}
		c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
		if err != nil {
			return nil, fmt.Errorf("build client: %w", err)
		}
		return &peering.DeploymentLauncher{Client: c, Image: f.VKImage, ExtraArgs: f.VKArgs,
			PullPolicy: corev1.PullPolicy(f.VKPullPolicy), PullSecrets: f.VKPullSecrets}, nil
	default:
		return nil, fmt.Errorf("--virtual-kubelet-mode %q: must be one of %s", f.VKMode, strings.Join([]string{"deployment", "process"}, ", "))
	}
}
