package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/ferry-io/ferry/cmd/ferry-controller-manager/app"
	"github.com/ferry-io/ferry/controllers/peering"
)

// A provider's controller manager needs no virtual kubelet image: only a
// consumer runs virtual kubelets, and its launcher says so when it must.
func TestDeploymentModeStartsWithoutAVirtualKubeletImage(t *testing.T) {
	l, err := newLauncher(app.Flags{VKMode: "deployment"}, &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("newLauncher without --virtual-kubelet-image = %v, want a launcher", err)
	}
	if d, ok := l.(*peering.DeploymentLauncher); !ok || d.Image != "" {
		t.Fatalf("launcher %#v, want a DeploymentLauncher without an image", l)
	}
	if _, err := newLauncher(app.Flags{VKMode: "pods"}, &rest.Config{Host: "https://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "--virtual-kubelet-mode") {
		t.Errorf("newLauncher of mode pods = %v, want an error naming --virtual-kubelet-mode", err)
	}
}

// A virtual kubelet flag taking a list (the chart's
// virtualKubelet.extraArgs) reaches the virtual kubelet whole: pflag's
// string slices would split it at its commas into flags of their own.
func TestVirtualKubeletArgKeepsCommas(t *testing.T) {
	var f app.Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.Register(fs)
	arg := "--reflection-policy=secrets=AllowList,configmaps=AllowList"
	if err := fs.Parse([]string{"--virtual-kubelet-arg=" + arg, "--virtual-kubelet-arg=--health-check-period=5s"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{arg, "--health-check-period=5s"}; !slices.Equal(f.VKArgs, want) {
		t.Errorf("virtual kubelet args %q, want %q", f.VKArgs, want)
	}
}

// The virtual kubelets' pull policy and secrets reach the launcher (the
// chart passes images.pullPolicy and images.pullSecrets); bad ones are
// refused, naming the flag.
func TestVirtualKubeletPullPolicyAndSecrets(t *testing.T) {
	var f app.Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse([]string{"--virtual-kubelet-image=registry.example.com/ferry-virtual-kubelet:v1",
		"--virtual-kubelet-image-pull-policy=Always", "--virtual-kubelet-image-pull-secret=regcred", "--virtual-kubelet-image-pull-secret=other"}); err != nil {
		t.Fatal(err)
	}
	l, err := newLauncher(f, &rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	d := l.(*peering.DeploymentLauncher)
	if d.PullPolicy != "Always" || !slices.Equal(d.PullSecrets, []string{"regcred", "other"}) {
		t.Errorf("launcher pull policy %q, secrets %v; want Always, [regcred other]", d.PullPolicy, d.PullSecrets)
	}
	for flag, bad := range map[string]app.Flags{
		"--virtual-kubelet-image-pull-policy": {VKMode: "deployment", VKPullPolicy: "Sometimes"},
		"--virtual-kubelet-image-pull-secret": {VKMode: "deployment", VKPullSecrets: []string{"Not_A_Name"}},
	} {
		if _, err := newLauncher(bad, &rest.Config{Host: "https://127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("newLauncher(%+v) = %v, want an error naming %s", bad, err, flag)
		}
	}
}
