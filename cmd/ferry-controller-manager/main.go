// Command ferry-controller-manager runs ferry's controllers in one cluster:
// tenants and grants for the consumers it serves, peers and virtual nodes for
// the providers it uses.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/controllermanager"
	"github.com/ferry-io/ferry/controllers/peering"
)

func main() {
	var (
		opts       controllermanager.Options
		clusterID  string
		kubeconfig string
		launcher   peering.ProcessLauncher
	)
	fs := pflag.NewFlagSet("ferry-controller-manager", pflag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&clusterID, "cluster-id", "", "this cluster's ID among its peers (a DNS label; fixed once recorded)")
	fs.IntVar(&opts.SharingPercentage, "sharing-percentage", 90, "percentage of the unrequested resources of this cluster's nodes granted to each consumer (1-100)")
	fs.DurationVar(&opts.GrantDebounce, "grant-debounce", 2*time.Second, "delay before re-granting after node and pod changes")
	fs.StringVar(&launcher.Binary, "virtual-kubelet-binary", "ferry-virtual-kubelet", "ferry-virtual-kubelet executable, run as a local process per virtual node")
	fs.StringVar(&launcher.LogDir, "virtual-kubelet-log-dir", os.TempDir(), "folder for the virtual kubelets' logs")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", "0", "address serving Prometheus metrics (0 disables)")
	fs.StringVar(&opts.HealthAddr, "health-probe-bind-address", "0", "address serving /healthz and /readyz (0 disables)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:])
	ctrl.SetLogger(klog.NewKlogr())

	if err := run(kubeconfig, clusterID, opts, &launcher); err != nil {
		fmt.Fprintln(os.Stderr, "ferry-controller-manager:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, clusterID string, opts controllermanager.Options, launcher *peering.ProcessLauncher) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	launcher.Kubeconfig = kubeconfig
	opts.ClusterID = ferryv1alpha1.ClusterID(clusterID)
	opts.Launcher = launcher
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllermanager.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
