package demo

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Config locates the demo's inputs and state, and shapes the demo: how many
// providers, their nodes' labels, extra flags for ferry's components.
type Config struct {
	// StateDir holds the daemon's PID, logs and kubeconfigs: one demo per
	// folder.
	StateDir string
	// BinDir holds ferry's binaries (make build).
	BinDir string
	// RepoRoot holds manifests/.
	RepoRoot string
	// Providers is how many provider clusters the consumer peers with.
	Providers int
	// ProviderLabels are the labels of the providers' nodes, as k=v,k2=v2:
	// one value for every provider, or one per provider in order.
	ProviderLabels []string
	// ComponentFlags are COMPONENT=FLAG, FLAG appended to the command line
	// of the components COMPONENT names (see componentFlagHelp).
	ComponentFlags []string

	// Filled by Complete.
	providerLabels []map[string]string
	componentFlags []componentFlag
}

// componentFlag is one parsed --component-flag.
type componentFlag struct {
	target string // a kind, or <cluster>-<kind>[-<node>]
	flag   string
}

// defaultDir is the demo's folder unless --dir says otherwise.
const defaultDir = ".demo"

// MaxProviders bounds --providers: each provider is a cluster of its own
// (etcd, kube-apiserver, controllers, kwok, a real node).
const MaxProviders = 5

// defaultProviderLabels are the provider nodes' labels unless
// --provider-labels says otherwise.
const defaultProviderLabels = "topology.kubernetes.io/region=eu-west"

// The kinds of ferry components the demo runs, as --component-flag names
// them. virtual-kubelet flags go to the controller manager, which starts
// the virtual kubelets (--virtual-kubelet-arg).
const (
	kindControllerManager = "controller-manager"
	kindWebhook           = "webhook"
	kindScheduler         = "scheduler"
	kindGateway           = "gateway"
	kindRouteAgent        = "route-agent"
	kindVirtualKubelet    = "virtual-kubelet"
)

var componentKinds = []string{kindControllerManager, kindWebhook, kindScheduler, kindGateway, kindRouteAgent, kindVirtualKubelet}

const componentFlagHelp = "COMPONENT=FLAG appended to that component's command line (repeatable); COMPONENT is a kind " +
	"(controller-manager, webhook, scheduler, gateway, route-agent, virtual-kubelet: every cluster's) or a kind after a cluster name " +
	"(consumer-webhook, provider-controller-manager, consumer-route-agent: the gateway's and route agents' reach their pods' arguments), " +
	"e.g. --component-flag controller-manager=-v=4"

// AddFlags adds the demo's flags to fs, with their defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.StateDir, "dir", defaultDir, "folder for the demo's state, logs and kubeconfigs; one demo per folder, another folder runs another demo beside it")
	fs.StringVar(&c.BinDir, "bin-dir", "bin", "folder of ferry's binaries (make build)")
	fs.StringVar(&c.RepoRoot, "repo-root", ".", "ferry's source tree (for manifests/)")
	fs.IntVar(&c.Providers, "providers", 1, fmt.Sprintf("provider clusters (1 to %d), each peered with the consumer and shown there as a virtual node of its own: provider, provider-2, ...", MaxProviders))
	fs.StringArrayVar(&c.ProviderLabels, "provider-labels", nil, "labels of the provider nodes, k=v[,k=v...]: given once, for every provider; repeated, one per provider in order (default "+defaultProviderLabels+")")
	fs.StringArrayVar(&c.ComponentFlags, "component-flag", nil, componentFlagHelp)
}

// Complete checks the flags, naming the one at fault, and makes the paths
// absolute (the daemon and the commands it starts see the same folders).
func (c *Config) Complete() error {
	for _, p := range []struct {
		name string
		v    *string
	}{{"--dir", &c.StateDir}, {"--bin-dir", &c.BinDir}, {"--repo-root", &c.RepoRoot}} {
		if *p.v == "" {
			return fmt.Errorf("%s: must not be empty", p.name)
		}
		abs, err := filepath.Abs(*p.v)
		if err != nil {
			return fmt.Errorf("%s %q: %w", p.name, *p.v, err)
		}
		*p.v = abs
	}
	if c.Providers < 1 || c.Providers > MaxProviders {
		return fmt.Errorf("--providers %d: must be 1 to %d (each provider is a cluster of its own)", c.Providers, MaxProviders)
	}
	raw := c.ProviderLabels
	switch len(raw) {
	case 0:
		raw = []string{defaultProviderLabels}
	case 1, c.Providers:
	default:
		return fmt.Errorf("--provider-labels: given %d times for %d providers: give it once (for every provider) or once per provider", len(raw), c.Providers)
	}
	c.providerLabels = nil
	for _, s := range raw {
		m, err := labels.ConvertSelectorToLabelsMap(s, field.WithPath(field.NewPath("label")))
		if err != nil {
			return fmt.Errorf("--provider-labels %q: want k=v[,k=v...] with valid label keys and values: %w", s, err)
		}
		c.providerLabels = append(c.providerLabels, m)
	}
	for len(c.providerLabels) < c.Providers { // given once: for every provider
		c.providerLabels = append(c.providerLabels, c.providerLabels[0])
	}
	c.componentFlags = nil
	clusters := c.clusterNames()
	for _, s := range c.ComponentFlags {
		target, flag, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(flag, "-") {
			return fmt.Errorf("--component-flag %q: want COMPONENT=FLAG, FLAG starting with -, e.g. controller-manager=-v=4", s)
		}
		if !knownTarget(target, clusters) {
			return fmt.Errorf("--component-flag %q: no component %q; want a kind (%s), alone or after a cluster name (%s), e.g. consumer-webhook",
				s, target, strings.Join(componentKinds, ", "), strings.Join(clusters, ", "))
		}
		c.componentFlags = append(c.componentFlags, componentFlag{target: target, flag: flag})
	}
	return nil
}

// knownTarget reports whether target names components the demo runs: a
// kind, or a cluster's component of a kind.
func knownTarget(target string, clusters []string) bool {
	if slices.Contains(componentKinds, target) {
		return true
	}
	for _, cluster := range clusters {
		kind, ok := strings.CutPrefix(target, cluster+"-")
		if !ok {
			continue
		}
		if kind == kindScheduler {
			return cluster == consumerName // ferry-scheduler runs for the consumer only
		}
		if slices.Contains(componentKinds, kind) {
			return true
		}
	}
	return false
}

// The clusters' names: the consumer and the providers.
const (
	consumerName = "consumer"
	providerName = "provider"
)

// providerNames are the providers' cluster names: provider, provider-2, ...
// (the first keeps the name the README and the output use).
func (c *Config) providerNames() []string {
	names := []string{providerName}
	for i := 2; i <= c.Providers; i++ {
		names = append(names, providerName+"-"+strconv.Itoa(i))
	}
	return names
}

func (c *Config) clusterNames() []string {
	return append([]string{consumerName}, c.providerNames()...)
}

// flagsFor are the extra flags of the component name (<cluster>-<kind>)
// of cluster, in the order given.
func (c *Config) flagsFor(cluster, kind, name string) []string {
	var out []string
	for _, f := range c.componentFlags {
		if f.target == kind || f.target == cluster+"-"+kind || f.target == name {
			out = append(out, f.flag)
		}
	}
	return out
}

// daemonArgs are the flags that give the daemon this configuration.
func (c *Config) daemonArgs() []string {
	args := []string{"--dir", c.StateDir, "--bin-dir", c.BinDir, "--repo-root", c.RepoRoot, "--providers", strconv.Itoa(c.Providers)}
	for _, l := range c.ProviderLabels {
		args = append(args, "--provider-labels", l)
	}
	for _, f := range c.ComponentFlags {
		args = append(args, "--component-flag", f)
	}
	return args
}
