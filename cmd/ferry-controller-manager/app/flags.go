// Package app holds ferry-controller-manager's command line: every flag the
// binary parses, importable so that hack/docgen documents exactly these.
package app

import (
	"flag"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/ferry-io/ferry/controllers/controllermanager"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/offloading"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/version"
)

// Name is the binary's name.
const Name = "ferry-controller-manager"

// Flags are the values of ferry-controller-manager's own flags.
type Flags struct {
	Kubeconfig, ClusterID, VKMode, VKImage, VKBinary, VKLogDir string
	VKPullPolicy, MoverPullPolicy                              string
	VKArgs, VKPullSecrets                                      []string
	QPS                                                        float32
	Burst                                                      int
	Opts                                                       controllermanager.Options
}

// NewFlagSet is the binary's whole command line: its own flags (into f),
// klog's and --version.
func NewFlagSet(f *Flags, errorHandling pflag.ErrorHandling) (*pflag.FlagSet, version.Flag) {
	fs := pflag.NewFlagSet(Name, errorHandling)
	f.Register(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return fs, version.AddFlag(fs)
}

// Register adds ferry-controller-manager's own flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of this cluster (empty: in-cluster)")
	fs.StringVar(&f.ClusterID, "cluster-id", "", "this cluster's ID among its peers (a DNS label; fixed once recorded)")
	fs.IntVar(&f.Opts.SharingPercentage, "sharing-percentage", 90, "percentage of the unrequested resources of this cluster's nodes granted to each consumer (1-100)")
	fs.DurationVar(&f.Opts.GrantDebounce, "grant-debounce", 2*time.Second, "delay before re-granting after node and pod changes")
	fs.StringToStringVar(&f.Opts.ClusterLabels, "cluster-labels", nil, "labels suggested for the virtual nodes standing for this cluster, e.g. ferry.io/provider=acme (region and zone come from the nodes)")
	fs.StringVar(&f.VKMode, "virtual-kubelet-mode", "deployment", "how virtual kubelets run: deployment (one per virtual node, in its namespace) or process (local processes, for the demo)")
	fs.StringVar(&f.VKImage, "virtual-kubelet-image", "", "ferry-virtual-kubelet image (deployment mode; needed only when this cluster consumes a provider)")
	fs.StringVar(&f.VKPullPolicy, "virtual-kubelet-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of --virtual-kubelet-image: Always, IfNotPresent or Never (deployment mode)")
	fs.StringArrayVar(&f.VKPullSecrets, "virtual-kubelet-image-pull-secret", nil, "Secret, in the virtual node's namespace (ferry-system), with the registry credentials for --virtual-kubelet-image (repeatable; deployment mode)")
	fs.StringVar(&f.VKBinary, "virtual-kubelet-binary", "ferry-virtual-kubelet", "ferry-virtual-kubelet executable (process mode)")
	fs.StringVar(&f.VKLogDir, "virtual-kubelet-log-dir", os.TempDir(), "folder for the virtual kubelets' logs (process mode)")
	fs.StringArrayVar(&f.VKArgs, "virtual-kubelet-arg", nil, "extra flag for every virtual kubelet, e.g. --virtual-kubelet-arg=--health-check-period=5s (repeatable; one flag each, commas included)")
	fs.IntVar(&f.Opts.ShadowPodWorkers, "shadow-pod-workers", offloading.DefaultShadowPodWorkers, "ShadowPods reconciled at once (provider side: one real pod per offloaded pod)")
	fs.Float32Var(&f.QPS, "kube-api-qps", 200, "queries per second to this cluster's API server")
	fs.IntVar(&f.Burst, "kube-api-burst", 400, "burst of queries to this cluster's API server")
	fs.StringVar(&f.Opts.StorageNamespace, "storage-namespace", storage.DefaultNamespace, "namespace of the real claims made for claims of the ferry storage class bound on this cluster's nodes")
	fs.StringVar(&f.Opts.VolumeMoverImage, "volume-mover-image", DefaultVolumeMoverImage(), "ferry-volume-mover image, run by VolumeMoves to copy a claim's data between clusters (empty: no VolumeMove controller)")
	fs.StringVar(&f.MoverPullPolicy, "volume-mover-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of --volume-mover-image: Always, IfNotPresent or Never")
	fs.BoolVar(&f.Opts.DisableStorage, "disable-storage", false, "do not serve the ferry storage class (storage.ferry.io/virtual)")
	fs.BoolVar(&f.Opts.DisableNodeTopology, "disable-node-topology", false, "do not label this cluster's real nodes topology.ferry.io/cluster=<cluster ID> (the topology key spreading pods across clusters)")
	fs.BoolVar(&f.Opts.Network.Disabled, "disable-network", false, "turn the network fabric off, for clusters whose networks already reach each other: pod addresses pass unchanged (also passed to the virtual kubelets)")
	fs.StringVar(&f.Opts.Network.PodCIDR, "pod-cidr", "", "this cluster's pod CIDR (default: detected from the nodes' spec.podCIDRs)")
	fs.StringVar(&f.Opts.Network.ServiceCIDR, "service-cidr", "", "this cluster's Service CIDR (default: read from the API server's ServiceCIDR kubernetes)")
	fs.StringSliceVar(&f.Opts.Network.Pool, "ipam-pool", []string{fabricctrl.DefaultPool}, "CIDRs the IPAM hands remapped and external CIDRs out of (must not overlap this cluster's networks)")
	fs.StringSliceVar(&f.Opts.Network.Reserved, "ipam-reserved", nil, "CIDRs of this cluster's networks the IPAM cannot see (such as the nodes' subnet): never handed out, and a peer overlapping them is remapped")
	fs.BoolVar(&f.Opts.LeaderElection, "leader-elect", true, "elect one active manager among replicas (a Lease in ferry-system)")
	fs.StringVar(&f.Opts.MetricsAddr, "metrics-bind-address", "127.0.0.1:8443", "address serving Prometheus metrics (0 disables; :8443 for all interfaces)")
	fs.BoolVar(&f.Opts.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to clients authorized for GET /metrics (TokenReview and SubjectAccessReview); false: plain HTTP to anyone who reaches the address")
	fs.StringVar(&f.Opts.HealthAddr, "health-probe-bind-address", "127.0.0.1:8081", "address serving /healthz and /readyz over plain HTTP (0 disables; :8081 for all interfaces, as kubelet probes need)")
}

// DefaultVolumeMoverImage is ferry-volume-mover of this build's version,
// from the registry the chart defaults to.
func DefaultVolumeMoverImage() string {
	tag := version.Get().Version
	if tag == "" || strings.ContainsAny(tag, "()+ ") {
		tag = "latest"
	}
	return "ghcr.io/ferry-io/ferry-volume-mover:" + tag
}
