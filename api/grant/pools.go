package grant

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Pool is the nodes of a provider sharing one value of the pool label, and
// what its eligible ones have free.
type Pool struct {
	// Value of the pool label.
	Value string
	// Nodes are the pool's eligible nodes.
	Nodes []corev1.Node
	// Free is what the pool's eligible nodes have unrequested.
	Free Free
}

// SplitPools groups the real (non-virtual) nodes by their value of the label
// key, sorted by value, each pool sized from its eligible nodes (those of
// free). A pool lasts as long as one real node has the value, so a pool
// whose nodes are all NotReady or cordoned for a while is granted nothing
// rather than removed. Nodes without the label (or with an empty value)
// belong to no pool: a pool is what a nodeSelector <key>=<value> selects,
// and no selector of that form selects them.
func SplitPools(nodes []corev1.Node, free Free, key string) []Pool {
	byValue := map[string]*Pool{}
	for i := range nodes {
		n := &nodes[i]
		value := n.Labels[key]
		if value == "" || n.Labels[ferryv1alpha1.LabelNodeType] == ferryv1alpha1.NodeTypeVirtual {
			continue
		}
		p := byValue[value]
		if p == nil {
			p = &Pool{Value: value, Free: Free{Total: corev1.ResourceList{}, PerNode: map[string]corev1.ResourceList{}}}
			byValue[value] = p
		}
		nodeFree, eligible := free.PerNode[n.Name]
		if !eligible {
			continue
		}
		p.Nodes = append(p.Nodes, *n)
		p.Free.PerNode[n.Name] = nodeFree
		for name, q := range nodeFree {
			total := p.Free.Total[name]
			total.Add(q)
			p.Free.Total[name] = total
		}
	}
	pools := make([]Pool, 0, len(byValue))
	for _, p := range byValue {
		pools = append(pools, *p)
	}
	slices.SortFunc(pools, func(a, b Pool) int {
		switch {
		case a.Value < b.Value:
			return -1
		case a.Value > b.Value:
			return 1
		}
		return 0
	})
	return pools
}

// Cap is request capped, resource by resource, by what is free; resources
// free does not name are left out (a pool without GPUs is granted none).
func Cap(request, free corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, want := range request {
		have, ok := free[name]
		if !ok {
			continue
		}
		if want.Cmp(have) > 0 {
			out[name] = have.DeepCopy()
		} else {
			out[name] = want.DeepCopy()
		}
	}
	return out
}

// PoolGrants is the grant in each pool: percent of the pool's free
// resources, or, with a fixed request, the request capped by the pool's free
// resources (the request holds for each pool). Each pool's labels are
// SuggestedLabels of its own nodes plus the pool label key=value. At most
// ferryv1alpha1.MaxNodePools pools are granted, the first by value;
// leftOut names the others.
func PoolGrants(nodes []corev1.Node, free Free, key string, request corev1.ResourceList, percent int, own map[string]string) (grants []ferryv1alpha1.NodePoolGrant, leftOut []string, err error) {
	for _, p := range SplitPools(nodes, free, key) {
		if len(grants) == ferryv1alpha1.MaxNodePools {
			leftOut = append(leftOut, p.Value)
			continue
		}
		var res corev1.ResourceList
		if len(request) > 0 {
			res = Cap(request, p.Free.Total)
		} else if res, err = Share(p.Free.Total, percent); err != nil {
			return nil, nil, err
		}
		labels := SuggestedLabels(p.Nodes, own)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = p.Value
		grants = append(grants, ferryv1alpha1.NodePoolGrant{
			Value:      p.Value,
			Nodes:      int32(len(p.Nodes)),
			Resources:  res,
			NodeShapes: Shapes(p.Free),
			Labels:     labels,
		})
	}
	return grants, leftOut, nil
}
