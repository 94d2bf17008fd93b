package demo

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// parse runs the flags as ferry-demo's main does: AddFlags, Parse, Complete.
func parse(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("ferry-demo up", pflag.ContinueOnError)
	var cfg Config
	cfg.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	return cfg, cfg.Complete()
}

func TestBadFlagsAreRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error: the flag and what it accepts
	}{
		{[]string{"--providers", "0"}, "--providers 0: must be 1 to 5"},
		{[]string{"--providers", "6"}, "--providers 6: must be 1 to 5"},
		{[]string{"--providers", "two"}, `"--providers"`},
		{[]string{"--dir", ""}, "--dir: must not be empty"},
		{[]string{"--provider-labels", "region"}, `--provider-labels "region": want k=v`},
		{[]string{"--provider-labels", "bad key=x"}, `--provider-labels "bad key=x"`},
		{[]string{"--provider-labels", "zone=not a value"}, `--provider-labels "zone=not a value"`},
		{[]string{"--providers", "3", "--provider-labels", "a=1", "--provider-labels", "a=2"}, "--provider-labels: given 2 times for 3 providers"},
		{[]string{"--component-flag", "webhook"}, `--component-flag "webhook": want COMPONENT=FLAG`},
		{[]string{"--component-flag", "webhook=v=4"}, `--component-flag "webhook=v=4": want COMPONENT=FLAG, FLAG starting with -`},
		{[]string{"--component-flag", "kubelet=-v=4"}, `--component-flag "kubelet=-v=4": no component "kubelet"`},
		{[]string{"--component-flag", "provider-scheduler=-v=4"}, `no component "provider-scheduler"`},
		{[]string{"--component-flag", "provider-2-webhook=-v=4"}, `no component "provider-2-webhook"`}, // one provider only
		// Route agents are a DaemonSet's pods: flags for one node's cannot be given.
		{[]string{"--component-flag", "consumer-route-agent-consumer-node-0=-v=5"}, `no component "consumer-route-agent-consumer-node-0"`},
		{[]string{"--state-dir", "x"}, "unknown flag: --state-dir"},
	} {
		_, err := parse(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestDefaultsKeepTheDemoAsDocumented(t *testing.T) {
	cfg, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(cfg.StateDir, "/.demo") || cfg.Providers != 1 {
		t.Errorf("defaults: --dir %s, --providers %d; want .demo (absolute), 1", cfg.StateDir, cfg.Providers)
	}
	if got := cfg.clusterNames(); !reflect.DeepEqual(got, []string{"consumer", "provider"}) {
		t.Errorf("clusters %v, want consumer, provider", got)
	}
	want := []map[string]string{{"topology.kubernetes.io/region": "eu-west"}}
	if !reflect.DeepEqual(cfg.providerLabels, want) {
		t.Errorf("provider labels %v, want %v", cfg.providerLabels, want)
	}
}

func TestProviderLabelsGivenOnceApplyToEveryProvider(t *testing.T) {
	cfg, err := parse(t, "--providers", "3", "--provider-labels", "topology.kubernetes.io/region=us-east,tier=gold")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.providerNames(); !reflect.DeepEqual(got, []string{"provider", "provider-2", "provider-3"}) {
		t.Errorf("providers %v", got)
	}
	one := map[string]string{"topology.kubernetes.io/region": "us-east", "tier": "gold"}
	if want := []map[string]string{one, one, one}; !reflect.DeepEqual(cfg.providerLabels, want) {
		t.Errorf("labels %v, want %v", cfg.providerLabels, want)
	}

	cfg, err = parse(t, "--providers", "2", "--provider-labels", "region=a", "--provider-labels", "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []map[string]string{{"region": "a"}, {}}; !reflect.DeepEqual(cfg.providerLabels, want) {
		t.Errorf("labels %v, want %v (one per provider, in order)", cfg.providerLabels, want)
	}
}

func TestComponentFlagsReachTheComponentsTheyName(t *testing.T) {
	cfg, err := parse(t, "--providers", "2",
		"--component-flag", "controller-manager=-v=4",
		"--component-flag", "provider-2-controller-manager=--grant-debounce=2s",
		"--component-flag", "consumer-route-agent=-v=5",
		"--component-flag", "provider-virtual-kubelet=--health-check-period=5s",
		"--component-flag", "consumer-scheduler=-v=3")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cluster, kind, name string
		want                []string
	}{
		{"consumer", kindControllerManager, "consumer-controller-manager", []string{"-v=4"}},
		{"provider-2", kindControllerManager, "provider-2-controller-manager", []string{"-v=4", "--grant-debounce=2s"}},
		{"consumer", kindRouteAgent, "consumer-route-agent", []string{"-v=5"}},
		{"provider", kindRouteAgent, "provider-route-agent", nil},
		{"provider", kindVirtualKubelet, "provider-virtual-kubelet", []string{"--health-check-period=5s"}},
		{"provider-2", kindVirtualKubelet, "provider-2-virtual-kubelet", nil},
		{"consumer", kindScheduler, "consumer-scheduler", []string{"-v=3"}},
		{"consumer", kindWebhook, "consumer-webhook", nil},
	} {
		if got := cfg.flagsFor(tc.cluster, tc.kind, tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: flags %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestDaemonGetsTheSameConfiguration(t *testing.T) {
	cfg, err := parse(t, "--dir", "/tmp/d", "--bin-dir", "/b", "--repo-root", "/r", "--providers", "2",
		"--provider-labels", "a=1", "--provider-labels", "a=2", "--component-flag", "webhook=-v=2")
	if err != nil {
		t.Fatal(err)
	}
	again, err := parse(t, cfg.daemonArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, cfg) {
		t.Errorf("daemon's configuration %+v, want %+v", again, cfg)
	}
}
