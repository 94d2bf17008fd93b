package clusterpreference

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/clusterselector"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
)

func nso(ns string, strategy ferryv1alpha1.PodOffloadingStrategy, pref ferryv1alpha1.PlacementPreference) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: strategy, PlacementPreference: pref}}
}

func TestClusterPreference(t *testing.T) {
	real, virtual := plugintest.RealNode("real-0"), plugintest.VirtualNode("virtual-eu", "eu", nil)
	pl := NewWith(clusterselector.NewStaticPolicies(
		nso("local-first", ferryv1alpha1.PodOffloadingLocalAndRemote, ferryv1alpha1.PlacementPreferenceLocalFirst),
		nso("remote-first", "", ferryv1alpha1.PlacementPreferenceRemoteFirst),
		nso("none", ferryv1alpha1.PodOffloadingLocalAndRemote, ferryv1alpha1.PlacementPreferenceNone),
		nso("unset", ferryv1alpha1.PodOffloadingLocalAndRemote, ""),
		nso("remote", ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PlacementPreferenceLocalFirst),
	))
	for name, tc := range map[string]struct {
		pod           *corev1.Pod
		skip          bool
		real, virtual int64
	}{
		"LocalFirst":                         {pod: plugintest.Pod("local-first", "p"), real: fwk.MaxScore, virtual: 0},
		"RemoteFirst (strategy defaulted)":   {pod: plugintest.Pod("remote-first", "p"), real: 0, virtual: fwk.MaxScore},
		"None":                               {pod: plugintest.Pod("none", "p"), skip: true},
		"unset":                              {pod: plugintest.Pod("unset", "p"), skip: true},
		"not offloaded":                      {pod: plugintest.Pod("elsewhere", "p"), skip: true},
		"Remote namespace":                   {pod: plugintest.Pod("remote", "p"), skip: true},
		"pod narrowed to Local":              {pod: plugintest.Pod("local-first", "p", placement.AnnotationPodOffloadingStrategy, "Local"), skip: true},
		"pod with an invalid strategy value": {pod: plugintest.Pod("local-first", "p", placement.AnnotationPodOffloadingStrategy, "Anywhere"), skip: true},
	} {
		cs := framework.NewCycleState()
		st := pl.PreScore(context.Background(), cs, tc.pod, nil)
		if st.IsSkip() != tc.skip || (!tc.skip && !st.IsSuccess()) {
			t.Errorf("%s: PreScore %v, want skip %v", name, st, tc.skip)
			continue
		}
		if tc.skip {
			continue
		}
		for node, want := range map[*corev1.Node]int64{real: tc.real, virtual: tc.virtual} {
			got, st := pl.Score(context.Background(), cs, tc.pod, plugintest.Info(node))
			if !st.IsSuccess() || got != want {
				t.Errorf("%s: Score(%s) = %d, %v; want %d", name, node.Name, got, st, want)
			}
		}
	}
}

// TestWeightDominates checks ferry's profiles: ClusterPreference is enabled
// with Weight, and its weight is more than the sum of every other scorer's,
// defaults included, so a preferred node always outscores the other side.
func TestWeightDominates(t *testing.T) {
	for _, file := range []string{
		filepath.Join("..", "..", "manifests", "scheduler", "config.yaml"),
		filepath.Join("..", "..", "test", "perf", "scheduler", "scheduler-config-ferry.yaml"),
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cfg config.KubeSchedulerConfiguration
		if err := runtimeDecode(data, &cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, p := range cfg.Profiles {
			var ours, others int32
			for _, pl := range append(p.Plugins.MultiPoint.Enabled, p.Plugins.Score.Enabled...) {
				if pl.Name == Name {
					ours = pl.Weight
				} else {
					others += pl.Weight
				}
			}
			if ours != Weight {
				t.Errorf("%s, profile %s: %s weight %d, want %d", file, p.SchedulerName, Name, ours, Weight)
			}
			if ours <= others {
				t.Errorf("%s, profile %s: %s weight %d does not exceed the other scorers' sum %d", file, p.SchedulerName, Name, ours, others)
			}
			t.Logf("%s, profile %s: %s %d, others %d", file, p.SchedulerName, Name, ours, others)
		}
	}
}

func runtimeDecode(data []byte, cfg *config.KubeSchedulerConfiguration) error {
	_, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, cfg)
	return err
}
