// Package clusterselector is the ClusterSelector scheduler plugin: it
// places a pod of an offloaded namespace only where the namespace's
// NamespaceOffloading allows (podOffloadingStrategy, narrowed by the pod's
// ferry.io/pod-offloading-strategy annotation or widened to Remote by
// runtimeClassName ferry, and clusterSelector), even
// when the pod webhook was bypassed; a pod of a namespace that is not
// offloaded never lands on a virtual node. See README.md.
package clusterselector

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

// Name is the plugin's name in profiles.
const Name = "ClusterSelector"

// Reasons a node is refused; each is the same for every node it applies
// to, so the scheduler's FailedScheduling event counts them.
const (
	ReasonNotOffloaded   = "namespace is not offloaded (no NamespaceOffloading): its pods stay on this cluster's nodes"
	ReasonLocalOnly      = "podOffloadingStrategy is Local: the pod stays on this cluster's nodes"
	ReasonRemoteOnly     = "podOffloadingStrategy is Remote: the pod runs only on virtual nodes"
	ReasonNotSelected    = "provider not selected by the namespace's clusterSelector"
	ReasonNoneSelected   = "no virtual node matches the namespace's clusterSelector"
	errPoliciesNotSynced = "NamespaceOffloadings not synced yet"
)

const stateKey fwk.StateKey = Name

// state is what PreFilter decides once per pod.
type state struct {
	local, remote bool
	// notOffloaded: the namespace has no policy.
	notOffloaded bool
	selector     *placement.ClusterSelector
}

func (s *state) Clone() fwk.StateData { return s }

// Plugin implements ClusterSelector.
type Plugin struct {
	args     Args
	policies *Policies
	nodes    *virtualnodes.Index
}

var (
	_ fwk.PreFilterPlugin   = &Plugin{}
	_ fwk.FilterPlugin      = &Plugin{}
	_ fwk.EnqueueExtensions = &Plugin{}
	_ fwk.SignPlugin        = &Plugin{}
)

// New is the plugin's factory.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if h.KubeConfig() == nil {
		return nil, errors.New("ClusterSelector: the scheduler has no kubeconfig to watch NamespaceOffloadings with")
	}
	policies, err := SharedPolicies(ctx, h.SharedInformerFactory(), func() (dynamic.Interface, error) { return dynamic.NewForConfig(h.KubeConfig()) })
	if err != nil {
		return nil, fmt.Errorf("ClusterSelector: %w", err)
	}
	nodes, err := virtualnodes.New(h.SharedInformerFactory().Core().V1().Nodes().Informer())
	if err != nil {
		return nil, fmt.Errorf("ClusterSelector: %w", err)
	}
	return NewWith(args, policies, nodes), nil
}

// NewWith builds the plugin over given policies and virtual nodes.
func NewWith(args Args, policies *Policies, nodes *virtualnodes.Index) *Plugin {
	return &Plugin{args: args, policies: policies, nodes: nodes}
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// PreFilter decides once per pod where it may go. A pod that does not
// tolerate the virtual-node taint and may run locally is skipped: the
// TaintToleration plugin keeps it off virtual nodes, and real nodes are
// allowed. A pod that may run only remotely gets the matching virtual
// nodes as its node set when they are few.
func (pl *Plugin) PreFilter(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !pl.policies.HasSynced() {
		return nil, fwk.AsStatus(errors.New(errPoliciesNotSynced))
	}
	s := &state{}
	policy := pl.policies.Get(pod.Namespace)
	if policy == nil {
		s.local, s.notOffloaded = true, true
		if placement.UsesVirtualRuntimeClass(pod.Spec.RuntimeClassName) {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, placement.RuntimeClassNotOffloaded(pod.Namespace).Error())
		}
	} else {
		if policy.SelectorErr != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "the namespace's NamespaceOffloading is invalid: "+policy.SelectorErr.Error())
		}
		strategy, ferr := placement.PodStrategyWithRuntimeClass(policy.Strategy, pod.Annotations, pod.Spec.RuntimeClassName)
		if ferr != nil {
			return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ferr.Error())
		}
		s.local = strategy != ferryv1alpha1.PodOffloadingRemote
		s.remote = strategy != ferryv1alpha1.PodOffloadingLocal
		s.selector = policy.Selector
	}
	if s.local && !placement.ToleratesVirtualNodes(pod.Spec.Tolerations) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cs.Write(stateKey, s)
	if s.local || pl.args.MaxPreFilterNodes == 0 {
		return nil, nil
	}
	names := sets.New[string]()
	for _, n := range pl.nodes.List() {
		if s.selector.Matches(n) {
			if names.Len() == int(pl.args.MaxPreFilterNodes) {
				return nil, nil // too many to be worth a node set
			}
			names.Insert(n.Name)
		}
	}
	if names.Len() == 0 {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNoneSelected)
	}
	return &fwk.PreFilterResult{NodeNames: names}, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin: other pods do not
// change the decision.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter admits node when the pod's policy does: O(1) per node plus the
// selector's match on a virtual node.
func (pl *Plugin) Filter(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	data, err := cs.Read(stateKey)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("ClusterSelector: reading PreFilter state: %w", err))
	}
	s := data.(*state)
	node := nodeInfo.Node()
	if !placement.IsVirtualNode(node) {
		if s.local {
			return nil
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonRemoteOnly)
	}
	switch {
	case s.notOffloaded:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNotOffloaded)
	case !s.remote:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonLocalOnly)
	case !s.selector.Matches(node):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonNotSelected)
	}
	return nil
}

// SignPod implements fwk.SignPlugin: the decision depends on the pod's
// namespace, its strategy annotation, whether it runs with ferry's
// RuntimeClass and its tolerations.
func (pl *Plugin) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{
		{Key: "ferry.io/ClusterSelector", Value: []string{pod.Namespace, pod.Annotations[placement.AnnotationPodOffloadingStrategy],
			strconv.FormatBool(placement.UsesVirtualRuntimeClass(pod.Spec.RuntimeClassName))}},
		{Key: fwk.TolerationsSignerName, Value: fwk.TolerationsSigner(pod)},
	}, nil
}

// NamespaceOffloadingsResource is how the scheduler's queue names the
// NamespaceOffloading resource (resource.version.group).
var NamespaceOffloadingsResource = fwk.EventResource(namespaceOffloadings.Resource + "." + namespaceOffloadings.Version + "." + namespaceOffloadings.Group)

// EventsToRegister implements fwk.EnqueueExtensions: a refused pod may fit
// once a node's labels change, a node appears, or its namespace's
// NamespaceOffloading changes.
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel}},
		{Event: fwk.ClusterEvent{Resource: NamespaceOffloadingsResource, ActionType: fwk.All}, QueueingHintFn: pl.offloadingChanged},
	}, nil
}

// offloadingChanged requeues the pods of the namespace whose
// NamespaceOffloading changed. The scheduler's own watch delivered the
// change; the plugin's watch may not have yet, so the change is applied to
// the policies first: the requeued pod is placed by the new policy.
func (pl *Plugin) offloadingChanged(logger klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	return pl.policies.QueueingHint(logger, pod, oldObj, newObj)
}

// QueueingHint is a fwk.QueueingHintFn for NamespaceOffloading events: it
// requeues the pods of the namespace whose NamespaceOffloading changed,
// once the change is applied to p.
func (p *Policies) QueueingHint(_ klog.Logger, pod *corev1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	var ns string
	switch {
	case newObj != nil:
		ns = p.apply(newObj)
	case oldObj != nil:
		ns = p.remove(oldObj)
	}
	if ns != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
