package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/images"
)

// The fabric's image: ferry-gateway (also the route agent), built by
// hack/images for linux/amd64 and imported into every real node's
// containerd as <gatewayRegistry>/ferry-gateway:<gatewayTag>.
const (
	gatewayRegistry  = "ferry.demo"
	gatewayTag       = "demo"
	gatewayComponent = "ferry-gateway"
)

// buildGatewayImage builds ferry-gateway's image as `make images` does
// (hack/images: a static binary alone on an empty base), for linux/amd64
// only, into dir, and exports it as a docker archive for the real nodes.
func buildGatewayImage(ctx context.Context, repoRoot, dir string) (string, error) {
	layout := filepath.Join(dir, "layout")
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/images", "-platforms", "linux/amd64",
		"-components", gatewayComponent, "-version", gatewayTag, "-out", layout)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the %s image (hack/images in %s): %w\n%s", gatewayComponent, repoRoot, err, out)
	}
	tarball := filepath.Join(dir, gatewayComponent+".tar")
	if _, err := images.ExportComponents(layout, gatewayRegistry, gatewayTag, tarball); err != nil {
		return "", err
	}
	return tarball, nil
}

// fabricKustomization is a kustomization of manifests/gateway (at base,
// relative to the folder it is written in) for one cluster: the cluster
// ID, the demo's image (never pulled), the gateway and the route agents on
// real nodes only (kwok plays the others: nothing would run there), the
// gateway's Service a NodePort (the test bed, like bare metal, has no load
// balancer: peers reach the gateway at its node's underlay address), and
// the user's extra flags (--component-flag gateway=..., route-agent=...).
func fabricKustomization(base, clusterID string, gatewayFlags, agentFlags []string) ([]byte, error) {
	realOnly := map[string]string{testbed.RealNodeLabel: "true"}
	workload := func(kind, name string, idArg int, extra []string) (map[string]any, error) {
		ops := []map[string]any{
			{"op": "replace", "path": fmt.Sprintf("/spec/template/spec/containers/0/args/%d", idArg), "value": "--cluster-id=" + clusterID},
			{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Never"},
			{"op": "add", "path": "/spec/template/spec/nodeSelector", "value": realOnly},
		}
		for _, f := range extra {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": f})
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return nil, err
		}
		return map[string]any{"target": map[string]string{"kind": kind, "name": name}, "patch": string(patch)}, nil
	}
	gw, err := workload("Deployment", "ferry-gateway", 0, gatewayFlags)
	if err != nil {
		return nil, err
	}
	agent, err := workload("DaemonSet", "ferry-route-agent", 1, agentFlags)
	if err != nil {
		return nil, err
	}
	svc := map[string]any{"target": map[string]string{"kind": "Service", "name": "ferry-gateway"},
		"patch": `[{"op": "replace", "path": "/spec/type", "value": "NodePort"}]`}
	return yaml.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  []string{filepath.ToSlash(base)},
		"images":     []map[string]string{{"name": gatewayComponent, "newName": gatewayRegistry + "/" + gatewayComponent, "newTag": gatewayTag}},
		"patches":    []map[string]any{gw, agent, svc},
	})
}

// installFabric applies manifests/gateway to c, as fabricKustomization
// shapes it, from a folder of the demo's state.
func installFabric(ctx context.Context, cfg Config, c *testbed.Cluster) error {
	dir := filepath.Join(cfg.StateDir, "fabric", c.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(cfg.RepoRoot, "manifests", "gateway"))
	if err != nil {
		return err
	}
	k, err := fabricKustomization(base, c.Name,
		cfg.flagsFor(c.Name, kindGateway, c.Name+"-"+kindGateway), cfg.flagsFor(c.Name, kindRouteAgent, c.Name+"-"+kindRouteAgent))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o600); err != nil {
		return err
	}
	return c.ApplyKustomization(ctx, dir)
}

// fabricSelector selects the gateway and route agent pods.
const fabricSelector = "app.kubernetes.io/name in (ferry-gateway,ferry-route-agent)"

// waitFabricPods waits until the gateway and route agents of the cluster
// c is a client of run Ready, for up to two minutes.
func waitFabricPods(ctx context.Context, cluster string, c *clients) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pods, err := c.kube.CoreV1().Pods(ferrySystem).List(ctx, metav1.ListOptions{LabelSelector: fabricSelector})
		var state string
		if err == nil {
			var ready bool
			if ready, state = fabricPodsReady(pods.Items); ready {
				return nil
			}
		} else {
			state = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: ferry's gateway and route agents are not Running and Ready after 2m (%s)", cluster, state)
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
}

// ferrySystem is ferry's namespace.
const ferrySystem = "ferry-system"

// fabricPodsReady says whether pods hold a gateway and at least one route
// agent, all Running and Ready, and else what they are.
func fabricPodsReady(pods []corev1.Pod) (bool, string) {
	gateway, agent, all := false, false, true
	var states []string
	for _, p := range pods {
		ready := p.Status.Phase == corev1.PodRunning && podReady(&p)
		all = all && ready
		states = append(states, fmt.Sprintf("%s %s ready=%t", p.Name, p.Status.Phase, ready))
		switch p.Labels["app.kubernetes.io/name"] {
		case "ferry-gateway":
			gateway = true
		case "ferry-route-agent":
			agent = true
		}
	}
	if !gateway {
		states = append(states, "no gateway pod")
	}
	if !agent {
		states = append(states, "no route agent pod")
	}
	return gateway && agent && all, strings.Join(states, ", ")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
