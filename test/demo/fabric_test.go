package demo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/ferry-io/ferry/test/testbed"
)

// The demo's kustomization of manifests/gateway, built as kubectl apply -k
// builds it: the cluster's ID, the demo's image (never pulled), real nodes
// only, a NodePort Service, the user's extra flags after the manifests'.
func TestFabricKustomizationShapesTheGatewayForTheDemo(t *testing.T) {
	dir := t.TempDir()
	manifests, err := filepath.Abs(filepath.Join("..", "..", "manifests", "gateway"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.Rel(dir, manifests)
	if err != nil {
		t.Fatal(err)
	}
	k, err := fabricKustomization(base, "provider-2", []string{"-v=4"}, []string{"-v=5", "--sync-period=10s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build of\n%s: %v", k, err)
	}
	var gw appsv1.Deployment
	var agent appsv1.DaemonSet
	var svc corev1.Service
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		var into any
		switch r.GetKind() + "/" + r.GetName() {
		case "Deployment/ferry-gateway":
			into = &gw
		case "DaemonSet/ferry-route-agent":
			into = &agent
		case "Service/ferry-gateway":
			into = &svc
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, into); err != nil {
			t.Fatal(err)
		}
	}
	want := gatewayRegistry + "/" + gatewayComponent + ":" + gatewayTag
	for _, w := range []struct {
		name string
		spec corev1.PodSpec
		args []string // in this order, somewhere in the container's args
	}{
		{"gateway", gw.Spec.Template.Spec, []string{"--cluster-id=provider-2", "-v=4"}},
		{"route agent", agent.Spec.Template.Spec, []string{"route-agent", "--cluster-id=provider-2", "-v=5", "--sync-period=10s"}},
	} {
		if len(w.spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", w.name, len(w.spec.Containers))
		}
		c := w.spec.Containers[0]
		if c.Image != want || c.ImagePullPolicy != corev1.PullNever {
			t.Errorf("%s: image %s, pull policy %q; want %s, Never", w.name, c.Image, c.ImagePullPolicy, want)
		}
		if w.spec.NodeSelector[testbed.RealNodeLabel] != "true" {
			t.Errorf("%s: node selector %v, want %s=true", w.name, w.spec.NodeSelector, testbed.RealNodeLabel)
		}
		if slices.Contains(c.Args, "--cluster-id=CHANGE-ME") {
			t.Errorf("%s: args %q keep the manifests' placeholder", w.name, c.Args)
		}
		at := -1
		for _, a := range w.args {
			i := slices.Index(c.Args, a)
			if i <= at {
				t.Errorf("%s: args %q, want %q in that order", w.name, c.Args, w.args)
				break
			}
			at = i
		}
	}
	if svc.Spec.Type != corev1.ServiceTypeNodePort {
		t.Errorf("gateway Service type %q, want NodePort", svc.Spec.Type)
	}
}

func TestFabricPodsReadyNeedsAGatewayAndRouteAgentsAllReady(t *testing.T) {
	pod := func(name, app string, phase corev1.PodPhase, ready bool) corev1.Pod {
		p := corev1.Pod{}
		p.Name, p.Labels, p.Status.Phase = name, map[string]string{"app.kubernetes.io/name": app}, phase
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	gw := pod("ferry-gateway-x", "ferry-gateway", corev1.PodRunning, true)
	agent := pod("ferry-route-agent-a", "ferry-route-agent", corev1.PodRunning, true)
	agent2 := pod("ferry-route-agent-b", "ferry-route-agent", corev1.PodRunning, true)
	for _, tc := range []struct {
		name      string
		pods      []corev1.Pod
		want      bool
		wantState string
	}{
		{"gateway and agent", []corev1.Pod{gw, agent}, true, ""},
		{"two agents", []corev1.Pod{gw, agent, agent2}, true, ""},
		{"gateway not ready", []corev1.Pod{pod("ferry-gateway-x", "ferry-gateway", corev1.PodRunning, false), agent}, false, "ferry-gateway-x Running ready=false"},
		{"gateway pending", []corev1.Pod{pod("ferry-gateway-x", "ferry-gateway", corev1.PodPending, false), agent}, false, "ferry-gateway-x Pending"},
		{"one agent pending", []corev1.Pod{gw, agent, pod("ferry-route-agent-b", "ferry-route-agent", corev1.PodPending, false)}, false, "ferry-route-agent-b Pending"},
		{"no gateway", []corev1.Pod{agent}, false, "no gateway pod"},
		{"no agent", []corev1.Pod{gw}, false, "no route agent pod"},
		{"nothing", nil, false, "no gateway pod, no route agent pod"},
	} {
		got, state := fabricPodsReady(tc.pods)
		if got != tc.want || !strings.Contains(state, tc.wantState) {
			t.Errorf("%s: %t (%s), want %t, state with %q", tc.name, got, state, tc.want, tc.wantState)
		}
	}
}

func TestParseDialAcceptsOnlyAnswersFromTheApiPods(t *testing.T) {
	pods := []string{"api-7b-a", "api-7b-b"}
	for _, tc := range []struct {
		raw     string
		wantErr string // empty: accepted
	}{
		{`{"responses":["api-7b-a"]}`, ""},
		{`{"responses":["api-7b-b","api-7b-a"]}`, ""},
		{`{"responses":["web-1"]}`, `answer "web-1" is the hostname of none of the api pods (api-7b-a, api-7b-b)`},
		{`{"errors":["reading from 10.96.4.2:8080: i/o timeout"]}`, "no answer: reading from 10.96.4.2:8080: i/o timeout"},
		{`{}`, "neither a response nor an error"},
		{`<html>`, "netexec's /dial answered"},
	} {
		_, err := parseDial([]byte(tc.raw), pods)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.raw, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one containing %q", tc.raw, err, tc.wantErr)
		}
	}
}
