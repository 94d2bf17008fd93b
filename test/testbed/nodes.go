package testbed

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelNodePool is set on every simulated node to the name of its pool.
const LabelNodePool = "testbed.ferry.io/pool"

// NodePool is a group of identical simulated nodes.
type NodePool struct {
	// Name of the pool; its nodes are <Name>-0, <Name>-1, ...
	Name string
	// Count of nodes (default 1).
	Count int
	// CPU of each node as a quantity (default "8").
	CPU string
	// Memory of each node as a quantity (default "32Gi").
	Memory string
	// Pods is each node's pod capacity (default 110).
	Pods int
	// Extended resources of each node, e.g. nvidia.com/gpu: 1.
	Extended corev1.ResourceList
	// Labels added to each node.
	Labels map[string]string
	// Taints of each node.
	Taints []corev1.Taint
}

// nodes builds the pool's Node objects, status included: kwok keeps the
// capacity it finds and takes over the conditions.
func (p NodePool) nodes() ([]*corev1.Node, error) {
	if p.Name == "" {
		return nil, fmt.Errorf("node pool: name is required")
	}
	count, cpu, memory, pods := p.Count, p.CPU, p.Memory, p.Pods
	if count == 0 {
		count = 1
	}
	if cpu == "" {
		cpu = "8"
	}
	if memory == "" {
		memory = "32Gi"
	}
	if pods == 0 {
		pods = 110
	}
	capacity := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(pods), resource.DecimalSI)}
	for field, value := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory} {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("node pool %s: %s %q: %w", p.Name, field, value, err)
		}
		capacity[field] = q
	}
	maps.Copy(capacity, p.Extended)

	out := make([]*corev1.Node, 0, count)
	for i := range count {
		name := fmt.Sprintf("%s-%d", p.Name, i)
		labels := map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "amd64",
			"type":                   "kwok",
			LabelNodePool:            p.Name,
		}
		maps.Copy(labels, p.Labels)
		out = append(out, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Labels:      labels,
				Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			},
			Spec: corev1.NodeSpec{Taints: p.Taints},
			Status: corev1.NodeStatus{
				Capacity:    capacity.DeepCopy(),
				Allocatable: capacity.DeepCopy(),
				NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "kwok", OperatingSystem: "linux", Architecture: "amd64"},
			},
		})
	}
	return out, nil
}

// AddNodes creates simulated nodes and waits until kwok reports them Ready.
func (c *Cluster) AddNodes(ctx context.Context, pools ...NodePool) error {
	if !c.opts.Kwok {
		return fmt.Errorf("cluster %s: add nodes: kwok is not running (set Options.Kwok)", c.Name)
	}
	var names []string
	for _, pool := range pools {
		nodes, err := pool.nodes()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if _, err := c.Kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("cluster %s: create node %s: %w", c.Name, n.Name, err)
			}
			names = append(names, n.Name)
		}
	}
	return c.waitFor(ctx, fmt.Sprintf("%d kwok nodes Ready", len(names)), 60*time.Second, func(ctx context.Context) error {
		for _, name := range names {
			n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !nodeReady(n) {
				return fmt.Errorf("node %s is not Ready yet", name)
			}
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
