package placement

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func selectorOf(terms ...corev1.NodeSelectorTerm) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: terms}
}

func termOf(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: reqs}
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestPodStrategy(t *testing.T) {
	const (
		local  = ferryv1alpha1.PodOffloadingLocal
		remote = ferryv1alpha1.PodOffloadingRemote
		both   = ferryv1alpha1.PodOffloadingLocalAndRemote
	)
	tests := []struct {
		ns      ferryv1alpha1.PodOffloadingStrategy
		value   *string
		want    ferryv1alpha1.PodOffloadingStrategy
		wantErr string
	}{
		{ns: both, want: both},
		{ns: both, value: new("Local"), want: local},
		{ns: both, value: new("Remote"), want: remote},
		{ns: local, value: new("Local"), want: local},
		{ns: local, value: new("Remote"), wantErr: `metadata.annotations[ferry.io/pod-offloading-strategy]: Invalid value: "Remote": the namespace's podOffloadingStrategy is Local: a pod may narrow it, not widen it (accepted: Local)`},
		{ns: remote, value: new("LocalAndRemote"), wantErr: "(accepted: Remote)"},
		{ns: both, value: new("local"), wantErr: `Unsupported value: "local": supported values: "Local", "Remote", "LocalAndRemote"`},
		{ns: both, value: new(""), wantErr: "Unsupported value"},
	}
	for _, tt := range tests {
		ann := map[string]string{}
		if tt.value != nil {
			ann[AnnotationPodOffloadingStrategy] = *tt.value
		}
		got, err := PodStrategy(tt.ns, ann)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ns %s, %v: error %v, want %q", tt.ns, tt.value, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ns %s, %v: got %s, %v; want %s", tt.ns, tt.value, got, err, tt.want)
		}
	}
}

func TestNewClusterSelectorNamesTheBadField(t *testing.T) {
	for name, tc := range map[string]struct {
		sel  *corev1.NodeSelector
		want string // "" for valid
	}{
		"nil selects all":      {nil, ""},
		"no terms selects all": {selectorOf(), ""},
		"valid In":             {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn, "eu"))), ""},
		"In without values": {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn))),
			"spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values"},
		"unknown operator": {selectorOf(termOf(req("region", corev1.NodeSelectorOpIn, "eu")), termOf(req("tier", "Near", "a"))),
			"spec.clusterSelector.nodeSelectorTerms[1].matchExpressions[0].operator"},
		"bad key": {selectorOf(termOf(req("bad key!", corev1.NodeSelectorOpExists))),
			"spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].key"},
		"Gt with a word": {selectorOf(termOf(req("gpus", corev1.NodeSelectorOpGt, "many"))),
			"spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].values[0]"},
		"matchFields with two names": {selectorOf(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "a", "b")}}),
			"spec.clusterSelector.nodeSelectorTerms[0].matchFields[0].values"},
	} {
		_, err := NewClusterSelector(tc.sel)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.want)
		}
	}
}

func TestToleratesVirtualNodes(t *testing.T) {
	for _, tt := range []struct {
		tol  corev1.Toleration
		want bool
	}{
		{corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		{corev1.Toleration{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}, true},
		{corev1.Toleration{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoExecute}, true},
		{corev1.Toleration{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpEqual, Value: "x"}, false},
		{corev1.Toleration{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, false},
		{corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}, false},
	} {
		if got := ToleratesVirtualNodes([]corev1.Toleration{tt.tol}); got != tt.want {
			t.Errorf("%+v: tolerates = %v, want %v", tt.tol, got, tt.want)
		}
	}
}
