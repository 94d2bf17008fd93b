// Package remotefit is the RemoteFit scheduler plugin: a pod passes a
// virtual node only if it fits on at least one real node of the provider
// behind it, judged by the node-shape summary the provider's grant
// publishes on the node. A virtual node is the sum of its provider's free
// nodes; without this check a pod bigger than any of them would be bound
// to it and never run. See README.md.
package remotefit

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/ferry-io/ferry/api/grant"
	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

// Name is the plugin's name in profiles.
const Name = "RemoteFit"

const stateKey fwk.StateKey = Name

// request is one resource the pod asks for.
type request struct {
	name corev1.ResourceName
	q    resource.Quantity
}

// state is the pod's requests, computed once per scheduling cycle.
type state struct{ requests []request }

func (s *state) Clone() fwk.StateData { return s }

// Plugin implements RemoteFit.
type Plugin struct {
	args  Args
	nodes *virtualnodes.Index
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.SignPlugin        = &Plugin{}
)

// New is the plugin's factory.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	nodes, err := virtualnodes.New(h.SharedInformerFactory().Core().V1().Nodes().Informer())
	if err != nil {
		return nil, fmt.Errorf("RemoteFit: %w", err)
	}
	return NewWith(args, nodes), nil
}

// NewWith builds the plugin over an index of virtual nodes.
func NewWith(args Args, nodes *virtualnodes.Index) *Plugin {
	return &Plugin{args: args, nodes: nodes}
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// PreFilter computes the pod's requests as the grant counts them (the
// larger of containers and init containers, plus overhead and one pod
// slot). A pod that does not tolerate the virtual-node taint is skipped:
// TaintToleration keeps it off virtual nodes.
func (pl *Plugin) PreFilter(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !placement.ToleratesVirtualNodes(pod.Spec.Tolerations) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	s := &state{}
	for name, q := range grant.PodRequests(pod) {
		if q.IsZero() || slices.Contains(pl.args.IgnoredResources, name) {
			continue
		}
		s.requests = append(s.requests, request{name: name, q: q})
	}
	// A stable order keeps refusal messages the same from node to node.
	slices.SortFunc(s.requests, func(a, b request) int { return strings.Compare(string(a.name), string(b.name)) })
	cs.Write(stateKey, s)
	return nil, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits a real node at once; a virtual node when one shape of its
// summary holds every request. O(shapes × requests), at most 32 shapes.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	node := nodeInfo.Node()
	if !placement.IsVirtualNode(node) {
		return nil
	}
	data, err := cs.Read(stateKey)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("RemoteFit: reading PreFilter state: %w", err))
	}
	s := data.(*state)
	shapes, known, err := pl.nodes.Shapes(node)
	cluster := placement.NodeCluster(node)
	switch {
	case err != nil:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("cluster %s: unreadable node-shape summary: %v", cluster, err))
	case !known && pl.args.UnknownShapes == UnknownShapesAllow:
		return nil
	case !known:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("cluster %s publishes no node-shape summary", cluster))
	}
	if msg := misfit(s.requests, shapes); msg != "" {
		// Unschedulable, not Unresolvable: the summary changes as the
		// provider's pods come and go.
		return fwk.NewStatus(fwk.Unschedulable, fmt.Sprintf("cluster %s: %s", cluster, msg))
	}
	return nil
}

// misfit says why no shape holds every request, "" when one does: the
// resources no remote node has enough of (with the most any has), or,
// when each fits somewhere but never together, that no single node has
// them all.
func misfit(requests []request, shapes []ferryv1alpha1.NodeShape) string {
	for i := range shapes {
		if fitsShape(requests, shapes[i].Resources) {
			return ""
		}
	}
	if len(shapes) == 0 {
		return "no real node has free resources"
	}
	var short []string
	for _, r := range requests {
		var most resource.Quantity
		for i := range shapes {
			if q := shapes[i].Resources[r.name]; q.Cmp(most) > 0 {
				most = q
			}
		}
		if r.q.Cmp(most) > 0 {
			short = append(short, fmt.Sprintf("%s %s requested, at most %s free on a node", r.name, r.q.String(), most.String()))
		}
	}
	if len(short) > 0 {
		return "no real node fits the pod: " + strings.Join(short, "; ")
	}
	names := make([]string, len(requests))
	for i, r := range requests {
		names[i] = fmt.Sprintf("%s %s", r.name, r.q.String())
	}
	return "no single real node has " + strings.Join(names, ", ") + " free together"
}

func fitsShape(requests []request, free corev1.ResourceList) bool {
	for _, r := range requests {
		have, ok := free[r.name]
		if !ok || r.q.Cmp(have) > 0 {
			return false
		}
	}
	return true
}

// SignPod implements fwk.SignPlugin: the decision depends on the pod's
// requests and tolerations.
func (pl *Plugin) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	reqs := grant.PodRequests(pod)
	sig := make([]string, 0, len(reqs))
	for name, q := range reqs {
		sig = append(sig, string(name)+"="+q.String())
	}
	slices.Sort(sig)
	return []fwk.SignFragment{
		{Key: "ferry.io/RemoteFit", Value: sig},
		{Key: fwk.TolerationsSignerName, Value: fwk.TolerationsSigner(pod)},
	}, nil
}

// EventsToRegister implements fwk.EnqueueExtensions: a pod may fit once a
// virtual node's summary changes (an annotation) or a node appears.
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation}},
	}, nil
}
