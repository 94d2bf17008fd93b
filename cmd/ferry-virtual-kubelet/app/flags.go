// Package app holds ferry-virtual-kubelet's command line: every flag the
// binary parses, importable so that hack/docgen documents exactly these.
package app

import (
	"flag"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
)

// Name is the binary's name.
const Name = "ferry-virtual-kubelet"

// Flags are the values of ferry-virtual-kubelet's own flags; Workers,
// Policies and Scope are still to be copied into Opts.
type Flags struct {
	Opts       node.Options
	Kubeconfig string
	Workers    map[string]int
	Policies   map[string]string
	Scope      string
}

// NewFlagSet is the binary's whole command line: its own flags (into f),
// klog's and --version.
func NewFlagSet(f *Flags, errorHandling pflag.ErrorHandling) (*pflag.FlagSet, version.Flag) {
	fs := pflag.NewFlagSet(Name, errorHandling)
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig of the local (consumer) cluster (empty: in-cluster)")
	fs.StringVar(&f.Opts.VirtualNodeNamespace, "virtual-node-namespace", ferryv1alpha1.SystemNamespace, "namespace of the VirtualNode to serve")
	fs.StringVar(&f.Opts.VirtualNodeName, "virtual-node-name", "", "name of the VirtualNode to serve (required)")
	fs.DurationVar(&f.Opts.HealthCheckPeriod, "health-check-period", node.DefaultHealthCheckPeriod, "how often the provider API server's /readyz is probed")
	fs.DurationVar(&f.Opts.HealthCheckTimeout, "health-check-timeout", node.DefaultHealthCheckTimeout, "timeout of one probe of the provider API server (at most --health-check-period)")
	fs.IntVar(&f.Opts.FailureThreshold, "health-check-failure-threshold", node.DefaultFailureThreshold, "consecutive failed probes after which the node is reported NotReady")
	fs.Int32Var(&f.Opts.LeaseDurationSeconds, "lease-duration-seconds", node.DefaultLeaseDurationSeconds, "duration of the node's Lease in kube-node-lease; it is renewed every quarter of it")
	fs.DurationVar(&f.Opts.NodeStatusReportFrequency, "node-status-report-frequency", node.DefaultNodeStatusReportFrequency, "how often the node's status is written when nothing in it changed (the Lease is the heartbeat; a change is written at once), as the kubelet's nodeStatusReportFrequency")
	fs.IntVar(&f.Opts.PodSyncWorkers, "pod-sync-workers", offloading.DefaultWorkers, "how many pods are offloaded (created, updated, deleted, status copied back) at once")
	fs.Float32Var(&f.Opts.ClientQPS, "client-qps", offloading.DefaultClientQPS, "queries per second the pod offloading may send to each cluster")
	fs.IntVar(&f.Opts.ClientBurst, "client-burst", offloading.DefaultClientBurst, "burst of queries the pod offloading may send to each cluster")
	fs.StringVar(&f.Opts.KubeletAddress, "kubelet-address", node.DefaultKubeletAddress, "host:port the kubelet API (logs, exec, attach, port-forward, stats) listens on; port 0 picks a free port, which the node advertises")
	fs.StringVar(&f.Opts.NodeIP, "node-ip", "", "address the node advertises for its kubelet API (default: the host of --kubelet-address; required when that is 0.0.0.0 or ::)")
	fs.StringVar(&f.Opts.KubeletTLSCertFile, "kubelet-tls-cert-file", "", "serving certificate of the kubelet API, reloaded when it changes (default: requested from the cluster with a CertificateSigningRequest to kubernetes.io/kubelet-serving and renewed before expiry)")
	fs.StringVar(&f.Opts.KubeletTLSKeyFile, "kubelet-tls-key-file", "", "private key of --kubelet-tls-cert-file")
	fs.StringToIntVar(&f.Workers, "reflection-workers", nil, "workers per reflected kind, e.g. configmaps=8,ingresses=0 (0 disables the kind; kinds: configmaps, secrets, serviceaccounts, services, endpointslices, ingresses, networkpolicies, persistentvolumeclaims, events; defaults 4 for the first five listed but serviceaccounts, 2 for the others)")
	fs.StringToStringVar(&f.Policies, "reflection-policy", nil, "reflection policy per kind, DenyList (default: every object but those annotated ferry.io/skip-reflection=true) or AllowList (only those annotated ferry.io/allow-reflection=true), e.g. secrets=AllowList")
	fs.Float32Var(&f.Opts.Reflection.ClientQPS, "reflection-client-qps", reflection.DefaultClientQPS, "queries per second the reflection may send to each cluster")
	fs.IntVar(&f.Opts.Reflection.ClientBurst, "reflection-client-burst", reflection.DefaultClientBurst, "burst of queries the reflection may send to each cluster")
	fs.DurationVar(&f.Opts.Reflection.ResyncPeriod, "reflection-resync-period", reflection.DefaultResyncPeriod, "how often every reflected object is compared with its provider copy although no change was seen (an equal copy is not written)")
	fs.StringVar(&f.Scope, "remote-scope", string(remotescope.Auto), "how the provider's objects are watched, by the pod offloading (ShadowPods, pods) and the reflection alike: cluster (one watch per kind, selected by the origin-cluster label; the provider must bind the consumer to the ferry-reflection-reader ClusterRole), namespace (one watch per kind and twin namespace) or auto (cluster when allowed, decided at start)")
	fs.StringVar(&f.Scope, "reflection-remote-scope", string(remotescope.Auto), "former name of --remote-scope, which it sets")
	_ = fs.MarkDeprecated("reflection-remote-scope", "use --remote-scope (it covers the pod offloading too)")
	fs.StringToStringVar(&f.Opts.Reflection.IngressClasses, "ingress-class-map", nil, "local=provider IngressClass names for reflected Ingresses (*=name for any other class); unmapped classes are dropped, so the provider's default class serves")
	fs.StringToStringVar(&f.Opts.Reflection.StorageClasses, "storage-class-map", nil, "local=provider StorageClass names for reflected PersistentVolumeClaims (*=name for any other class); unmapped classes are dropped, so the provider's default class serves")
	fs.DurationVar(&f.Opts.Reflection.TokenExpiration, "service-account-token-expiration", reflection.DefaultTokenExpiration, "lifetime of the consumer service-account tokens handed to offloaded pods (at least 10m); renewed at 80% of it")
	fs.BoolVar(&f.Opts.DisableNetwork, "disable-network", false, "pass pod addresses unchanged both ways (clusters whose networks already reach each other); by default they are translated through the network fabric's mapping, and left out until it is known")
	fs.BoolVar(&f.Opts.DisableConsumerAPIServer, "disable-consumer-api-server", false, "leave offloaded pods with the provider's kubernetes Service; by default their KUBERNETES_SERVICE_HOST names kubernetes.default, resolved to this cluster's API server through the network fabric (per pod: annotation ferry.io/consumer-api-server=false)")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	return fs, version.AddFlag(fs)
}
