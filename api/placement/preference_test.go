package placement

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestPreference(t *testing.T) {
	for _, tc := range []struct {
		strategy ferryv1alpha1.PodOffloadingStrategy
		pref     ferryv1alpha1.PlacementPreference
		want     ferryv1alpha1.PlacementPreference
	}{
		{ferryv1alpha1.PodOffloadingLocalAndRemote, ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceLocalFirst},
		{"", ferryv1alpha1.PlacementPreferenceRemoteFirst, ferryv1alpha1.PlacementPreferenceRemoteFirst},
		{ferryv1alpha1.PodOffloadingLocal, ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceNone},
		{ferryv1alpha1.PodOffloadingRemote, ferryv1alpha1.PlacementPreferenceRemoteFirst, ferryv1alpha1.PlacementPreferenceNone},
		{ferryv1alpha1.PodOffloadingLocalAndRemote, "", ferryv1alpha1.PlacementPreferenceNone},
	} {
		if got := Preference(tc.strategy, tc.pref); got != tc.want {
			t.Errorf("Preference(%q, %q) = %q, want %q", tc.strategy, tc.pref, got, tc.want)
		}
	}
}

func TestPrefersNode(t *testing.T) {
	real := &corev1.Node{}
	virtual := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}}}
	for _, tc := range []struct {
		pref              ferryv1alpha1.PlacementPreference
		node              *corev1.Node
		preferred, hasOne bool
	}{
		{ferryv1alpha1.PlacementPreferenceLocalFirst, real, true, true},
		{ferryv1alpha1.PlacementPreferenceLocalFirst, virtual, false, true},
		{ferryv1alpha1.PlacementPreferenceRemoteFirst, real, false, true},
		{ferryv1alpha1.PlacementPreferenceRemoteFirst, virtual, true, true},
		{ferryv1alpha1.PlacementPreferenceNone, virtual, false, false},
	} {
		p, ok := PrefersNode(tc.pref, tc.node)
		if p != tc.preferred || ok != tc.hasOne {
			t.Errorf("PrefersNode(%s, virtual=%v) = %v, %v; want %v, %v", tc.pref, IsVirtualNode(tc.node), p, ok, tc.preferred, tc.hasOne)
		}
	}
	// The webhook's term agrees with PrefersNode.
	for _, pref := range []ferryv1alpha1.PlacementPreference{ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceRemoteFirst} {
		term := PreferredNodeTerm(pref)
		for _, n := range []*corev1.Node{real, virtual} {
			want, _ := PrefersNode(pref, n)
			if got := matchesTerm(term.Preference, n); got != want {
				t.Errorf("%s: term matches virtual=%v: %v, want %v", pref, IsVirtualNode(n), got, want)
			}
		}
	}
	if PreferredNodeTerm(ferryv1alpha1.PlacementPreferenceNone) != nil {
		t.Error("None has a preferred term")
	}
}

func matchesTerm(term corev1.NodeSelectorTerm, n *corev1.Node) bool {
	s, err := NewClusterSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}})
	if err != nil {
		panic(err)
	}
	return s.Matches(n)
}

func TestWithDeletionCost(t *testing.T) {
	lf, rf, none := ferryv1alpha1.PlacementPreferenceLocalFirst, ferryv1alpha1.PlacementPreferenceRemoteFirst, ferryv1alpha1.PlacementPreferenceNone
	ferry := func(v string) map[string]string {
		return map[string]string{AnnotationPodDeletionCost: v, AnnotationDeletionCostSet: v, "a": "b"}
	}
	for _, tc := range []struct {
		name    string
		in      map[string]string
		pref    ferryv1alpha1.PlacementPreference
		want    map[string]string
		changed bool
	}{
		{"LocalFirst sets -100", map[string]string{"a": "b"}, lf, ferry("-100"), true},
		{"RemoteFirst sets +100 on nil", nil, rf, map[string]string{AnnotationPodDeletionCost: "100", AnnotationDeletionCostSet: "100"}, true},
		{"already set", ferry("-100"), lf, ferry("-100"), false},
		{"preference changed", ferry("-100"), rf, ferry("100"), true},
		{"None removes ferry's", ferry("-100"), none, map[string]string{"a": "b"}, true},
		{"None without cost", map[string]string{"a": "b"}, none, map[string]string{"a": "b"}, false},
		{"user's cost kept", map[string]string{AnnotationPodDeletionCost: "7"}, lf, map[string]string{AnnotationPodDeletionCost: "7"}, false},
		{"user's cost kept under None", map[string]string{AnnotationPodDeletionCost: "7"}, none, map[string]string{AnnotationPodDeletionCost: "7"}, false},
		{"user changed ferry's", map[string]string{AnnotationPodDeletionCost: "7", AnnotationDeletionCostSet: "-100"}, rf,
			map[string]string{AnnotationPodDeletionCost: "7", AnnotationDeletionCostSet: "-100"}, false},
	} {
		before := maps.Clone(tc.in)
		got, changed := WithDeletionCost(tc.in, tc.pref)
		if changed != tc.changed || !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, got, changed, tc.want, tc.changed)
		}
		if !maps.Equal(before, tc.in) {
			t.Errorf("%s: input changed to %v", tc.name, tc.in)
		}
	}
}
