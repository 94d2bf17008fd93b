package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/ferry-io/ferry/controllers/peering"
)

// A provider's controller manager needs no virtual kubelet image: only a
// consumer runs virtual kubelets, and its launcher says so when it must.
func TestDeploymentModeStartsWithoutAVirtualKubeletImage(t *testing.T) {
	l, err := newLauncher(flags{vkMode: "deployment"}, &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("newLauncher without --virtual-kubelet-image = %v, want a launcher", err)
	}
	if d, ok := l.(*peering.DeploymentLauncher); !ok || d.Image != "" {
		t.Fatalf("launcher %#v, want a DeploymentLauncher without an image", l)
	}
	if _, err := newLauncher(flags{vkMode: "pods"}, &rest.Config{Host: "https://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "--virtual-kubelet-mode") {
		t.Errorf("newLauncher of mode pods = %v, want an error naming --virtual-kubelet-mode", err)
	}
}

// A virtual kubelet flag taking a list (the chart's
// virtualKubelet.extraArgs) reaches the virtual kubelet whole: pflag's
// string slices would split it at its commas into flags of their own.
func TestVirtualKubeletArgKeepsCommas(t *testing.T) {
	var f flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.register(fs)
	arg := "--reflection-policy=secrets=AllowList,configmaps=AllowList"
	if err := fs.Parse([]string{"--virtual-kubelet-arg=" + arg, "--virtual-kubelet-arg=--health-check-period=5s"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{arg, "--health-check-period=5s"}; !slices.Equal(f.vkArgs, want) {
		t.Errorf("virtual kubelet args %q, want %q", f.vkArgs, want)
	}
}
