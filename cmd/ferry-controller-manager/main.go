// Command ferry-controller-manager runs ferry's controllers in one cluster:
// tenants and grants for the consumers it serves, peers and virtual nodes for
// the providers it uses.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

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
	"github.com/ferry-io/ferry/controllers/controllermanager"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/offloading"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/version"
)

type flags struct {
	kubeconfig, clusterID, vkMode, vkImage, vkBinary, vkLogDir string
	vkPullPolicy, moverPullPolicy                              string
	vkArgs, vkPullSecrets                                      []string
	qps                                                        float32
	burst                                                      int
	opts                                                       controllermanager.Options
}

func main() {
	var f flags
	fs := pflag.NewFlagSet("ferry-controller-manager", pflag.ExitOnError)
	f.register(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	showVersion := version.AddFlag(fs)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-controller-manager")
	ctrl.SetLogger(klog.NewKlogr())
	ctrlmetrics.Registry.MustRegister(version.Collector("ferry-controller-manager"))

	if err := run(f); err != nil {
		fmt.Fprintln(os.Stderr, "ferry-controller-manager:", err)
		os.Exit(1)
	}
}

// register adds ferry-controller-manager's own flags to fs.
func (f *flags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&f.clusterID, "cluster-id", "", "this cluster's ID among its peers (a DNS label; fixed once recorded)")
	fs.IntVar(&f.opts.SharingPercentage, "sharing-percentage", 90, "percentage of the unrequested resources of this cluster's nodes granted to each consumer (1-100)")
	fs.DurationVar(&f.opts.GrantDebounce, "grant-debounce", 2*time.Second, "delay before re-granting after node and pod changes")
	fs.StringToStringVar(&f.opts.ClusterLabels, "cluster-labels", nil, "labels suggested for the virtual nodes standing for this cluster, e.g. ferry.io/provider=acme (region and zone come from the nodes)")
	fs.StringVar(&f.vkMode, "virtual-kubelet-mode", "deployment", "how virtual kubelets run: deployment (one per virtual node, in its namespace) or process (local processes, for the demo)")
	fs.StringVar(&f.vkImage, "virtual-kubelet-image", "", "ferry-virtual-kubelet image (deployment mode; needed only when this cluster consumes a provider)")
	fs.StringVar(&f.vkPullPolicy, "virtual-kubelet-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of --virtual-kubelet-image: Always, IfNotPresent or Never (deployment mode)")
	fs.StringArrayVar(&f.vkPullSecrets, "virtual-kubelet-image-pull-secret", nil, "Secret, in the virtual node's namespace (ferry-system), with the registry credentials for --virtual-kubelet-image (repeatable; deployment mode)")
	fs.StringVar(&f.vkBinary, "virtual-kubelet-binary", "ferry-virtual-kubelet", "ferry-virtual-kubelet executable (process mode)")
	fs.StringVar(&f.vkLogDir, "virtual-kubelet-log-dir", os.TempDir(), "folder for the virtual kubelets' logs (process mode)")
	fs.StringArrayVar(&f.vkArgs, "virtual-kubelet-arg", nil, "extra flag for every virtual kubelet, e.g. --virtual-kubelet-arg=--health-check-period=5s (repeatable; one flag each, commas included)")
	fs.IntVar(&f.opts.ShadowPodWorkers, "shadow-pod-workers", offloading.DefaultShadowPodWorkers, "ShadowPods reconciled at once (provider side: one real pod per offloaded pod)")
	fs.Float32Var(&f.qps, "kube-api-qps", 200, "queries per second to this cluster's API server")
	fs.IntVar(&f.burst, "kube-api-burst", 400, "burst of queries to this cluster's API server")
	fs.StringVar(&f.opts.StorageNamespace, "storage-namespace", storage.DefaultNamespace, "namespace of the real claims made for claims of the ferry storage class bound on this cluster's nodes")
	fs.StringVar(&f.opts.VolumeMoverImage, "volume-mover-image", defaultVolumeMoverImage(), "ferry-volume-mover image, run by VolumeMoves to copy a claim's data between clusters (empty: no VolumeMove controller)")
	fs.StringVar(&f.moverPullPolicy, "volume-mover-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of --volume-mover-image: Always, IfNotPresent or Never")
	fs.BoolVar(&f.opts.DisableStorage, "disable-storage", false, "do not serve the ferry storage class (storage.ferry.io/virtual)")
	fs.BoolVar(&f.opts.DisableNodeTopology, "disable-node-topology", false, "do not label this cluster's real nodes topology.ferry.io/cluster=<cluster ID> (the topology key spreading pods across clusters)")
	fs.BoolVar(&f.opts.Network.Disabled, "disable-network", false, "turn the network fabric off, for clusters whose networks already reach each other: pod addresses pass unchanged (also passed to the virtual kubelets)")
	fs.StringVar(&f.opts.Network.PodCIDR, "pod-cidr", "", "this cluster's pod CIDR (default: detected from the nodes' spec.podCIDRs)")
	fs.StringVar(&f.opts.Network.ServiceCIDR, "service-cidr", "", "this cluster's Service CIDR (default: read from the API server's ServiceCIDR kubernetes)")
	fs.StringSliceVar(&f.opts.Network.Pool, "ipam-pool", []string{fabricctrl.DefaultPool}, "CIDRs the IPAM hands remapped and external CIDRs out of (must not overlap this cluster's networks)")
	fs.StringSliceVar(&f.opts.Network.Reserved, "ipam-reserved", nil, "CIDRs of this cluster's networks the IPAM cannot see (such as the nodes' subnet): never handed out, and a peer overlapping them is remapped")
	fs.BoolVar(&f.opts.LeaderElection, "leader-elect", true, "elect one active manager among replicas (a Lease in ferry-system)")
	fs.StringVar(&f.opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&f.opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&f.opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
}

func run(f flags) error {
	cfg, err := kubeconfig.ForComponent("--kubeconfig", f.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = f.qps, f.burst
	if f.opts.Network.Disabled {
		// The virtual kubelets then pass pod addresses unchanged too.
		f.vkArgs = append(f.vkArgs, "--disable-network")
	}
	if f.opts.Launcher, err = newLauncher(f, cfg); err != nil {
		return err
	}
	if l, ok := f.opts.Launcher.(*peering.ProcessLauncher); ok {
		// On the way out, the virtual kubelets stop with a SIGTERM (they would
		// otherwise die with this process, killed).
		defer l.StopAll(context.Background())
	}
	f.opts.ClusterID = ferryv1alpha1.ClusterID(f.clusterID)
	switch p := corev1.PullPolicy(f.moverPullPolicy); p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		f.opts.VolumeMoverPullPolicy = p
	default:
		return fmt.Errorf("--volume-mover-image-pull-policy %q: must be Always, IfNotPresent or Never", f.moverPullPolicy)
	}
	ctx := ctrl.SetupSignalHandler()
	mgr, err := controllermanager.New(ctx, cfg, f.opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// newLauncher is the virtual kubelet launcher of --virtual-kubelet-mode.
// In deployment mode --virtual-kubelet-image may be empty: a cluster that
// only provides runs no virtual kubelet, and the launcher fails, naming
// the flag, only when this cluster consumes.
func newLauncher(f flags, cfg *rest.Config) (peering.VirtualKubeletLauncher, error) {
	switch f.vkMode {
	case "process":
		return &peering.ProcessLauncher{Binary: f.vkBinary, Kubeconfig: f.kubeconfig, LogDir: f.vkLogDir, ExtraArgs: f.vkArgs}, nil
	case "deployment":
		switch corev1.PullPolicy(f.vkPullPolicy) {
		case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			return nil, fmt.Errorf("--virtual-kubelet-image-pull-policy %q: must be Always, IfNotPresent or Never", f.vkPullPolicy)
		}
		for _, name := range f.vkPullSecrets {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return nil, fmt.Errorf("--virtual-kubelet-image-pull-secret %q: %s", name, strings.Join(errs, "; "))
			}
		}
		if f.vkImage == "" {
			klog.InfoS("No --virtual-kubelet-image: this cluster can provide to peers; consuming a provider fails until the manager is restarted with one")
		}
		c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
		if err != nil {
			return nil, fmt.Errorf("build client: %w", err)
		}
		return &peering.DeploymentLauncher{Client: c, Image: f.vkImage, ExtraArgs: f.vkArgs,
			PullPolicy: corev1.PullPolicy(f.vkPullPolicy), PullSecrets: f.vkPullSecrets}, nil
	default:
		return nil, fmt.Errorf("--virtual-kubelet-mode %q: must be one of %s", f.vkMode, strings.Join([]string{"deployment", "process"}, ", "))
	}
}

// defaultVolumeMoverImage is ferry-volume-mover of this build's version,
// from the registry the chart defaults to.
func defaultVolumeMoverImage() string {
	tag := version.Get().Version
	if tag == "" || strings.ContainsAny(tag, "()+ ") {
		tag = "latest"
	}
	return "ghcr.io/ferry-io/ferry-volume-mover:" + tag
}
