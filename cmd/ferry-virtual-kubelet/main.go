// Command ferry-virtual-kubelet serves one VirtualNode: it registers, in the
// local (consumer) cluster, the virtual Node standing for a peered provider
// cluster, keeps it alive and truthful, and runs the pods bound to it in the
// provider. ferry's controller manager runs
// one per VirtualNode.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
)

// gcPercent is the garbage collector's target unless GOGC is set: the heap
// may grow half its live size between collections instead of the whole. The
// live heap is mostly informer caches of the node's pods; with the default
// 100, the 1000-pod burst (make bench-offload) peaked at 49 MiB anonymous,
// with 50 at 40 MiB, for about 1 ms more of its CPU per offloaded pod
// (5.5 against 4.7 ms, on a loaded machine).
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	var (
		opts       node.Options
		kubeconfig string
		workers    map[string]int
		policies   map[string]string
		scope      string
	)
	fs := pflag.NewFlagSet("ferry-virtual-kubelet", pflag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the local (consumer) cluster (empty: in-cluster)")
	fs.StringVar(&opts.VirtualNodeNamespace, "virtual-node-namespace", ferryv1alpha1.SystemNamespace, "namespace of the VirtualNode to serve")
	fs.StringVar(&opts.VirtualNodeName, "virtual-node-name", "", "name of the VirtualNode to serve (required)")
	fs.DurationVar(&opts.HealthCheckPeriod, "health-check-period", node.DefaultHealthCheckPeriod, "how often the provider API server's /readyz is probed")
	fs.DurationVar(&opts.HealthCheckTimeout, "health-check-timeout", node.DefaultHealthCheckTimeout, "timeout of one probe of the provider API server (at most --health-check-period)")
	fs.IntVar(&opts.FailureThreshold, "health-check-failure-threshold", node.DefaultFailureThreshold, "consecutive failed probes after which the node is reported NotReady")
	fs.Int32Var(&opts.LeaseDurationSeconds, "lease-duration-seconds", node.DefaultLeaseDurationSeconds, "duration of the node's Lease in kube-node-lease; it is renewed every quarter of it")
	fs.DurationVar(&opts.NodeStatusReportFrequency, "node-status-report-frequency", node.DefaultNodeStatusReportFrequency, "how often the node's status is written when nothing in it changed (the Lease is the heartbeat; a change is written at once), as the kubelet's nodeStatusReportFrequency")
	fs.IntVar(&opts.PodSyncWorkers, "pod-sync-workers", offloading.DefaultWorkers, "how many pods are offloaded (created, updated, deleted, status copied back) at once")
	fs.Float32Var(&opts.ClientQPS, "client-qps", offloading.DefaultClientQPS, "queries per second the pod offloading may send to each cluster")
	fs.IntVar(&opts.ClientBurst, "client-burst", offloading.DefaultClientBurst, "burst of queries the pod offloading may send to each cluster")
	fs.StringVar(&opts.KubeletAddress, "kubelet-address", node.DefaultKubeletAddress, "host:port the kubelet API (logs, exec, attach, port-forward, stats) listens on; port 0 picks a free port, which the node advertises")
	fs.StringVar(&opts.NodeIP, "node-ip", "", "address the node advertises for its kubelet API (default: the host of --kubelet-address; required when that is 0.0.0.0 or ::)")
	fs.StringVar(&opts.KubeletTLSCertFile, "kubelet-tls-cert-file", "", "serving certificate of the kubelet API, reloaded when it changes (default: requested from the cluster with a CertificateSigningRequest to kubernetes.io/kubelet-serving and renewed before expiry)")
	fs.StringVar(&opts.KubeletTLSKeyFile, "kubelet-tls-key-file", "", "private key of --kubelet-tls-cert-file")
	fs.StringToIntVar(&workers, "reflection-workers", nil, "workers per reflected kind, e.g. configmaps=8,ingresses=0 (0 disables the kind; kinds: configmaps, secrets, serviceaccounts, services, endpointslices, ingresses, networkpolicies, persistentvolumeclaims, events; defaults 4 for the first five listed but serviceaccounts, 2 for the others)")
	fs.StringToStringVar(&policies, "reflection-policy", nil, "reflection policy per kind, DenyList (default: every object but those annotated ferry.io/skip-reflection=true) or AllowList (only those annotated ferry.io/allow-reflection=true), e.g. secrets=AllowList")
	fs.Float32Var(&opts.Reflection.ClientQPS, "reflection-client-qps", reflection.DefaultClientQPS, "queries per second the reflection may send to each cluster")
	fs.IntVar(&opts.Reflection.ClientBurst, "reflection-client-burst", reflection.DefaultClientBurst, "burst of queries the reflection may send to each cluster")
	fs.DurationVar(&opts.Reflection.ResyncPeriod, "reflection-resync-period", reflection.DefaultResyncPeriod, "how often every reflected object is compared with its provider copy although no change was seen (an equal copy is not written)")
	fs.StringVar(&scope, "remote-scope", string(remotescope.Auto), "how the provider's objects are watched, by the pod offloading (ShadowPods, pods) and the reflection alike: cluster (one watch per kind, selected by the origin-cluster label; the provider must bind the consumer to the ferry-reflection-reader ClusterRole), namespace (one watch per kind and twin namespace) or auto (cluster when allowed, decided at start)")
	fs.StringVar(&scope, "reflection-remote-scope", string(remotescope.Auto), "former name of --remote-scope, which it sets")
	_ = fs.MarkDeprecated("reflection-remote-scope", "use --remote-scope (it covers the pod offloading too)")
	fs.StringToStringVar(&opts.Reflection.IngressClasses, "ingress-class-map", nil, "local=provider IngressClass names for reflected Ingresses (*=name for any other class); unmapped classes are dropped, so the provider's default class serves")
	fs.StringToStringVar(&opts.Reflection.StorageClasses, "storage-class-map", nil, "local=provider StorageClass names for reflected PersistentVolumeClaims (*=name for any other class); unmapped classes are dropped, so the provider's default class serves")
	fs.DurationVar(&opts.Reflection.TokenExpiration, "service-account-token-expiration", reflection.DefaultTokenExpiration, "lifetime of the consumer service-account tokens handed to offloaded pods (at least 10m); renewed at 80% of it")
	fs.BoolVar(&opts.DisableNetwork, "disable-network", false, "pass pod addresses unchanged both ways (clusters whose networks already reach each other); by default they are translated through the network fabric's mapping, and left out until it is known")
	fs.BoolVar(&opts.DisableConsumerAPIServer, "disable-consumer-api-server", false, "leave offloaded pods with the provider's kubernetes Service; by default their KUBERNETES_SERVICE_HOST names kubernetes.default, resolved to this cluster's API server through the network fabric (per pod: annotation ferry.io/consumer-api-server=false)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	showVersion := version.AddFlag(fs)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-virtual-kubelet")
	opts.RemoteScope = remotescope.Scope(scope)
	if len(workers) > 0 {
		opts.Reflection.Workers = map[reflection.Kind]int{}
		for k, n := range workers {
			opts.Reflection.Workers[reflection.Kind(k)] = n
		}
	}
	if len(policies) > 0 {
		opts.Reflection.Policies = map[reflection.Kind]reflection.Policy{}
		for k, p := range policies {
			opts.Reflection.Policies[reflection.Kind(k)] = reflection.Policy(p)
		}
	}
	if !fs.Changed("health-check-timeout") {
		opts.HealthCheckTimeout = 0 // the default, at most --health-check-period
	}

	if err := run(kubeconfig, opts); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, "ferry-virtual-kubelet:", err)
		os.Exit(1)
	}
	klog.Flush()
}

func run(kubeconfigPath string, opts node.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := kubeconfig.ForComponent("--kubeconfig", kubeconfigPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	return node.Run(ctx, cfg, opts)
}
