package main

import (
	"strings"
	"testing"

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
