// Package clusterpreference is the ClusterPreference scheduler plugin: a pod
// of a namespace whose NamespaceOffloading has placementPreference
// LocalFirst scores this cluster's real nodes highest and virtual nodes
// lowest, RemoteFirst the other way round; Filter (the other plugins)
// still decides where it fits, so the pod goes to the other side only when
// no node of its preferred side does. See README.md.
package clusterpreference

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/clusterselector"
)

// Name is the plugin's name in profiles.
const Name = "ClusterPreference"

// Weight is the plugin's weight in ferry's profiles: more than the sum of
// every other scorer's weight in them (kube-scheduler v1.36's defaults:
// TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity
// 2, DynamicResources 2, NodeResourcesFit 1, NodeResourcesBalancedAllocation
// 1, ImageLocality 1, PodGroupPodsCount 1 = 15; ferry's DataGravity 2; 17 in
// all), so a preferred node (Weight × 100) outscores any node of the other
// side (at most 17 × 100) whatever the others say.
const Weight = 20

const stateKey fwk.StateKey = Name

// state is what PreScore decides once per pod.
type state struct {
	pref ferryv1alpha1.PlacementPreference
}

func (s *state) Clone() fwk.StateData { return s }

// Plugin implements ClusterPreference.
type Plugin struct {
	policies *clusterselector.Policies
}

var (
	_ fwk.PreScorePlugin = &Plugin{}
	_ fwk.ScorePlugin    = &Plugin{}
	_ fwk.SignPlugin     = &Plugin{}
)

// New is the plugin's factory. It takes no args. It reads
// NamespaceOffloadings through the watch ClusterSelector uses.
func New(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if h.KubeConfig() == nil {
		return nil, errors.New("ClusterPreference: the scheduler has no kubeconfig to watch NamespaceOffloadings with")
	}
	policies, err := clusterselector.SharedPolicies(ctx, h.SharedInformerFactory(), func() (dynamic.Interface, error) { return dynamic.NewForConfig(h.KubeConfig()) })
	if err != nil {
		return nil, fmt.Errorf("ClusterPreference: %w", err)
	}
	return NewWith(policies), nil
}

// NewWith builds the plugin over given policies.
func NewWith(policies *clusterselector.Policies) *Plugin { return &Plugin{policies: policies} }

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// PreScore reads the pod's preference once: its namespace's, when the pod
// may run on both sides. Pods without one (not offloaded, None, or a
// strategy narrowed to Local or Remote by the pod's annotation) are skipped,
// so Score is never called for them.
func (pl *Plugin) PreScore(_ context.Context, cs fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if !pl.policies.HasSynced() {
		// Scored without the preference, the pod could land on the wrong
		// side for good: retry it once every NamespaceOffloading is known.
		return fwk.AsStatus(errors.New("ClusterPreference: NamespaceOffloadings not synced yet"))
	}
	policy := pl.policies.Get(pod.Namespace)
	if policy == nil || policy.Preference == "" || policy.Preference == ferryv1alpha1.PlacementPreferenceNone {
		return fwk.NewStatus(fwk.Skip)
	}
	strategy, ferr := placement.PodStrategy(policy.Strategy, pod.Annotations)
	if ferr != nil {
		return fwk.NewStatus(fwk.Skip) // ClusterSelector's Filter refuses it
	}
	pref := placement.Preference(strategy, policy.Preference)
	if pref == ferryv1alpha1.PlacementPreferenceNone {
		return fwk.NewStatus(fwk.Skip)
	}
	cs.Write(stateKey, &state{pref: pref})
	return nil
}

// Score is fwk.MaxScore for a node on the preferred side, 0 for the
// other: O(1) per node.
func (pl *Plugin) Score(_ context.Context, cs fwk.CycleState, _ *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := cs.Read(stateKey)
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("ClusterPreference: reading PreScore state: %w", err))
	}
	if preferred, _ := placement.PrefersNode(data.(*state).pref, nodeInfo.Node()); preferred {
		return fwk.MaxScore, nil
	}
	return 0, nil
}

// ScoreExtensions implements fwk.ScorePlugin: scores are final.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return nil }

// SignPod implements fwk.SignPlugin: the score depends on the pod's
// namespace and its strategy annotation.
func (pl *Plugin) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{
		{Key: "ferry.io/ClusterPreference", Value: []string{pod.Namespace, pod.Annotations[placement.AnnotationPodOffloadingStrategy]}},
	}, nil
}
