package node

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
)

// Defaults of Options' zero fields.
const (
	DefaultHealthCheckPeriod    = 10 * time.Second
	DefaultHealthCheckTimeout   = 5 * time.Second
	DefaultFailureThreshold     = 3
	DefaultLeaseDurationSeconds = int32(40)
	// DefaultNodeStatusReportFrequency is the kubelet's own default
	// (nodeStatusReportFrequency): with a Lease as the heartbeat, an
	// unchanged Node status is written every 5 minutes, not every minute.
	DefaultNodeStatusReportFrequency = 5 * time.Minute

	// minLeaseDurationSeconds keeps the lease renew interval (a quarter of
	// the duration, in whole seconds) above zero.
	minLeaseDurationSeconds = 4
)

// Options choose the VirtualNode a virtual kubelet serves and tune how it
// watches its provider. Zero durations and counts take the defaults above.
type Options struct {
	// VirtualNodeNamespace and VirtualNodeName name the ferry.io/v1alpha1
	// VirtualNode to serve, in the local cluster.
	VirtualNodeNamespace, VirtualNodeName string

	// HealthCheckPeriod is how often the provider API server's /readyz is
	// probed (default 10s).
	HealthCheckPeriod time.Duration
	// HealthCheckTimeout bounds one probe (default 5s); at most HealthCheckPeriod.
	HealthCheckTimeout time.Duration
	// FailureThreshold is how many consecutive failed probes make the Node
	// NotReady (default 3).
	FailureThreshold int
	// LeaseDurationSeconds is the Node Lease's duration (default 40); it is
	// renewed every quarter of it.
	LeaseDurationSeconds int32
	// NodeStatusReportFrequency is how often the Node's status is written
	// when nothing in it changed (default 5m, as the kubelet); a change
	// (capacity, conditions, addresses) is written at once.
	NodeStatusReportFrequency time.Duration

	// PodSyncWorkers is how many pods are offloaded at once (default 16).
	PodSyncWorkers int
	// ClientQPS and ClientBurst bound the pod offloading's requests to each
	// cluster (defaults 200 and 400).
	ClientQPS   float32
	ClientBurst int

	// RemoteScope says how the provider's objects are watched, by the pod
	// offloading (ShadowPods and pods) and the reflection (the reflected
	// kinds) alike: cluster, one watch per kind, selected by ferry's origin
	// label, which needs the provider to bind the consumer to the
	// ferry-reflection-reader ClusterRole; namespace, one per kind and twin
	// namespace; auto (the default) asks the provider once at start.
	RemoteScope remotescope.Scope

	// Reflection tunes the reflection of the objects offloaded pods need
	// (ConfigMaps, Secrets, Services, ...) to the provider.
	Reflection reflection.Options

	// DisableNetwork turns the network fabric's translation off: pod
	// addresses pass unchanged both ways (clusters on a flat network; the
	// controller manager's --disable-network passes it on).
	DisableNetwork bool
	// DisableConsumerAPIServer leaves offloaded pods with the provider's
	// kubernetes Service instead of pointing them at this cluster's API
	// server through the fabric.
	DisableConsumerAPIServer bool

	// KubeletAddress is where the kubelet API (logs, exec, attach,
	// port-forward, stats) listens, host:port (default 0.0.0.0:10250; port 0
	// picks a free one, which the Node advertises).
	KubeletAddress string
	// NodeIP is the address the Node advertises for its kubelet API (its
	// InternalIP); default: KubeletAddress's host, required when that is
	// unspecified (0.0.0.0, ::).
	NodeIP string
	// KubeletTLSCertFile and KubeletTLSKeyFile hold the kubelet API's serving
	// certificate, reloaded when they change; when empty, one is requested
	// from the local cluster (signer kubernetes.io/kubelet-serving) and
	// renewed before it expires.
	KubeletTLSCertFile, KubeletTLSKeyFile string
}

// DefaultKubeletAddress is where the kubelet API listens by default.
const DefaultKubeletAddress = "0.0.0.0:10250"

// withDefaults returns o with its zero tuning fields set to the defaults.
func (o Options) withDefaults() Options {
	if o.HealthCheckPeriod == 0 {
		o.HealthCheckPeriod = DefaultHealthCheckPeriod
	}
	if o.HealthCheckTimeout == 0 {
		o.HealthCheckTimeout = min(DefaultHealthCheckTimeout, o.HealthCheckPeriod)
	}
	if o.FailureThreshold == 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.LeaseDurationSeconds == 0 {
		o.LeaseDurationSeconds = DefaultLeaseDurationSeconds
	}
	if o.NodeStatusReportFrequency == 0 {
		o.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
	}
	if o.KubeletAddress == "" {
		o.KubeletAddress = DefaultKubeletAddress
	}
	if o.NodeIP == "" {
		if host, _, err := net.SplitHostPort(o.KubeletAddress); err == nil {
			if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
				o.NodeIP = host
			}
		}
	}
	return o
}

// Validate reports every invalid option, naming its command-line flag.
// Zero tuning fields are valid: they take the defaults.
func (o *Options) Validate() error {
	d := o.withDefaults()
	var errs []error
	if d.VirtualNodeNamespace == "" {
		errs = append(errs, errors.New("--virtual-node-namespace is required"))
	}
	if d.VirtualNodeName == "" {
		errs = append(errs, errors.New("--virtual-node-name is required"))
	}
	if d.HealthCheckPeriod < 0 {
		errs = append(errs, fmt.Errorf("--health-check-period (%s) must be positive", d.HealthCheckPeriod))
	}
	if d.HealthCheckTimeout < 0 {
		errs = append(errs, fmt.Errorf("--health-check-timeout (%s) must be positive", d.HealthCheckTimeout))
	}
	if d.HealthCheckPeriod > 0 && d.HealthCheckTimeout > d.HealthCheckPeriod {
		errs = append(errs, fmt.Errorf("--health-check-timeout (%s) must not exceed --health-check-period (%s)", d.HealthCheckTimeout, d.HealthCheckPeriod))
	}
	if d.FailureThreshold < 1 {
		errs = append(errs, fmt.Errorf("--health-check-failure-threshold (%d) must be at least 1", d.FailureThreshold))
	}
	if d.PodSyncWorkers < 0 {
		errs = append(errs, fmt.Errorf("--pod-sync-workers (%d) must not be negative", d.PodSyncWorkers))
	}
	if d.ClientQPS < 0 || d.ClientBurst < 0 {
		errs = append(errs, fmt.Errorf("--client-qps (%g) and --client-burst (%d) must not be negative", d.ClientQPS, d.ClientBurst))
	}
	if d.LeaseDurationSeconds < minLeaseDurationSeconds {
		errs = append(errs, fmt.Errorf("--lease-duration-seconds (%d) must be at least %d", d.LeaseDurationSeconds, minLeaseDurationSeconds))
	}
	if d.NodeStatusReportFrequency < 0 {
		errs = append(errs, fmt.Errorf("--node-status-report-frequency (%s) must be positive", d.NodeStatusReportFrequency))
	}
	if host, port, err := net.SplitHostPort(d.KubeletAddress); err != nil {
		errs = append(errs, fmt.Errorf("--kubelet-address %q: must be host:port: %w", d.KubeletAddress, err))
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		errs = append(errs, fmt.Errorf("--kubelet-address %q: port %q must be a number from 0 to 65535", d.KubeletAddress, port))
	} else if host != "" && net.ParseIP(host) == nil {
		errs = append(errs, fmt.Errorf("--kubelet-address %q: host %q must be an IP address", d.KubeletAddress, host))
	}
	switch ip := net.ParseIP(d.NodeIP); {
	case d.NodeIP == "":
		errs = append(errs, fmt.Errorf("--node-ip is required when --kubelet-address (%s) listens on every address", d.KubeletAddress))
	case ip == nil || ip.IsUnspecified():
		errs = append(errs, fmt.Errorf("--node-ip %q: must be a unicast IP address", d.NodeIP))
	}
	if err := d.RemoteScope.Validate("remote-scope"); err != nil {
		errs = append(errs, err)
	}
	if err := d.Reflection.Validate(); err != nil {
		errs = append(errs, err)
	}
	if (d.KubeletTLSCertFile == "") != (d.KubeletTLSKeyFile == "") {
		errs = append(errs, errors.New("--kubelet-tls-cert-file and --kubelet-tls-key-file go together"))
	}
	return errors.Join(errs...)
}
