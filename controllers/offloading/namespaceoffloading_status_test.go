package offloading

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// clusterIn is a cluster's status: twin namespace, phase and Ready condition.
func clusterIn(id, twin string, phase ferryv1alpha1.OffloadingPhase, ready metav1.ConditionStatus, reason, msg string) ferryv1alpha1.ClusterOffloadingStatus {
	return ferryv1alpha1.ClusterOffloadingStatus{ClusterID: ferryv1alpha1.ClusterID(id), TwinNamespace: twin, Phase: phase,
		Conditions: []metav1.Condition{{Type: ferryv1alpha1.ConditionReady, Status: ready, Reason: reason, Message: msg}}}
}

func TestSetOffloadingConditions(t *testing.T) {
	eu := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}}
	ready := func(id string) ferryv1alpha1.ClusterOffloadingStatus {
		return clusterIn(id, "shop-home", ferryv1alpha1.OffloadingReady, metav1.ConditionTrue, "Ready", "")
	}
	for name, tc := range map[string]struct {
		spec     ferryv1alpha1.NamespaceOffloadingSpec
		selected []ferryv1alpha1.ClusterID
		clusters []ferryv1alpha1.ClusterOffloadingStatus
		// want is "<Ready status>/<reason>/<message fragment>".
		want         string
		wantSelected string
	}{
		"every selected cluster Ready, pods where the strategy says": {
			spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote}, selected: ids("a", "b"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{ready("a"), ready("b")},
			want:     "True/Ready/twin namespace shop-home ready in a, b; pods: Remote (the selected clusters only)", wantSelected: "True/ClustersSelected/a, b",
		},
		"a deselected cluster draining does not hold Ready back": {
			selected: ids("a"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{ready("a"), clusterIn("b", "shop-home", ferryv1alpha1.OffloadingTerminating, metav1.ConditionFalse, ReasonDraining, "2 pods")},
			want:     "True/Ready/pods: LocalAndRemote", wantSelected: "True/ClustersSelected/a",
		},
		"no provider peered": {
			want: "False/NoClusterSelected/no cluster is peered", wantSelected: "False/NoClusterSelected/no cluster is peered",
		},
		"no provider matches the selector": {
			spec: ferryv1alpha1.NamespaceOffloadingSpec{ClusterSelector: eu},
			want: "False/NoClusterSelected/matches spec.clusterSelector", wantSelected: "False/NoClusterSelected/",
		},
		"one cluster still Pending": {
			selected: ids("a", "b"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{ready("a"), clusterIn("b", "shop-home", ferryv1alpha1.OffloadingPending, metav1.ConditionUnknown, ReasonWaitingForProvider, "no answer yet")},
			want:     "False/ClustersNotReady/waiting for b (Pending, WaitingForProvider: no answer yet)", wantSelected: "True/ClustersSelected/a, b",
		},
		"a Ready phase under an unreachable provider is not Ready": {
			selected: ids("a"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "shop-home", ferryv1alpha1.OffloadingReady, metav1.ConditionUnknown, ReasonProviderUnreachable, "connection refused")},
			want:     "False/ClustersNotReady/a (Ready, ProviderUnreachable: connection refused)", wantSelected: "True/ClustersSelected/a",
		},
		"the provider's refusal surfaces with its reason": {
			spec: ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName}, selected: ids("a", "b"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "shop", ferryv1alpha1.OffloadingReady, metav1.ConditionTrue, "Ready", ""), clusterIn("b", "shop", ferryv1alpha1.OffloadingFailed, metav1.ConditionFalse, ReasonNamespaceConflict, "namespace shop exists and was not made for consumer home")},
			want:     "False/NamespaceConflict/failed: b (Failed, NamespaceConflict: namespace shop exists", wantSelected: "True/ClustersSelected/a, b",
		},
		"every selected cluster refused: the message says new pods stay on this cluster": {
			spec: ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName}, selected: ids("b"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{clusterIn("b", "shop", ferryv1alpha1.OffloadingFailed, metav1.ConditionFalse, ReasonNamespaceConflict, "namespace shop exists")},
			want:     "False/NamespaceConflict/the namespace is not labelled ferry.io/offloading-enabled, so its new pods run on this cluster's nodes", wantSelected: "True/ClustersSelected/b",
		},
		"a changed mapping strategy is reported, not acted on": {
			spec: ferryv1alpha1.NamespaceOffloadingSpec{NamespaceMappingStrategy: ferryv1alpha1.NamespaceMappingEnforceSameName}, selected: ids("a"),
			clusters: []ferryv1alpha1.ClusterOffloadingStatus{ready("a")},
			want:     "False/NamespaceMappingChanged/twin namespaces exist as shop-home in a, but spec.namespaceMappingStrategy EnforceSameName now names them shop", wantSelected: "True/ClustersSelected/a",
		},
	} {
		want := TwinNamespaceName(&tc.spec, "shop", "home")
		status := &ferryv1alpha1.NamespaceOffloadingStatus{Clusters: tc.clusters}
		setOffloadingConditions(status, &tc.spec, tc.selected, want, 7)
		for _, check := range []struct{ condType, want string }{{ferryv1alpha1.NamespaceOffloadingReady, tc.want}, {ferryv1alpha1.NamespaceOffloadingClustersSelected, tc.wantSelected}} {
			c := meta.FindStatusCondition(status.Conditions, check.condType)
			if c == nil {
				t.Errorf("%s: no %s condition", name, check.condType)
				continue
			}
			parts := strings.SplitN(check.want, "/", 3)
			if string(c.Status) != parts[0] || c.Reason != parts[1] || !strings.Contains(c.Message, parts[2]) || c.ObservedGeneration != 7 {
				t.Errorf("%s: %s = %s/%s/%q (generation %d), want %s (generation 7)", name, check.condType, c.Status, c.Reason, c.Message, c.ObservedGeneration, check.want)
			}
		}
	}
}

func TestNextLookPollsOnlyWhileSomethingMoves(t *testing.T) {
	r := &NamespaceOffloadingReconciler{PollInterval: time.Second, ResyncPeriod: time.Hour}
	for name, tc := range map[string]struct {
		clusters []ferryv1alpha1.ClusterOffloadingStatus
		want     time.Duration
	}{
		"nothing offloaded": {nil, time.Hour},
		"all Ready":         {[]ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "t", ferryv1alpha1.OffloadingReady, metav1.ConditionTrue, "Ready", "")}, time.Hour},
		"Pending":           {[]ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "t", ferryv1alpha1.OffloadingPending, metav1.ConditionUnknown, ReasonWaitingForProvider, "")}, time.Second},
		"Terminating":       {[]ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "t", ferryv1alpha1.OffloadingTerminating, metav1.ConditionFalse, ReasonDraining, "")}, time.Second},
		"unreachable":       {[]ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "t", ferryv1alpha1.OffloadingReady, metav1.ConditionUnknown, ReasonProviderUnreachable, "")}, time.Second},
		"just asked":        {[]ferryv1alpha1.ClusterOffloadingStatus{justAsked()}, quickLook},
		"Failed":            {[]ferryv1alpha1.ClusterOffloadingStatus{clusterIn("a", "t", ferryv1alpha1.OffloadingFailed, metav1.ConditionFalse, ReasonNamespaceConflict, "")}, 10 * time.Second},
	} {
		if got := r.nextLook(&ferryv1alpha1.NamespaceOffloadingStatus{Clusters: tc.clusters}); got != tc.want {
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

// justAsked is a cluster whose provider was asked a moment ago.
func justAsked() ferryv1alpha1.ClusterOffloadingStatus {
	c := clusterIn("a", "t", ferryv1alpha1.OffloadingPending, metav1.ConditionUnknown, ReasonWaitingForProvider, "")
	c.Conditions[0].LastTransitionTime = metav1.Now()
	return c
}

func ids(s ...string) []ferryv1alpha1.ClusterID {
	out := make([]ferryv1alpha1.ClusterID, len(s))
	for i, id := range s {
		out[i] = ferryv1alpha1.ClusterID(id)
	}
	return out
}

// TestEverySelectedFailedKeepsTheLabelWhileAnyProviderMayTakePods protects
// the rule the namespace's ferry.io/offloading-enabled label follows: off
// only when no selected provider can run its pods.
func TestEverySelectedFailedKeepsTheLabelWhileAnyProviderMayTakePods(t *testing.T) {
	failed := func(id string) ferryv1alpha1.ClusterOffloadingStatus {
		return clusterIn(id, "shop", ferryv1alpha1.OffloadingFailed, metav1.ConditionFalse, ReasonNamespaceConflict, "taken")
	}
	pending := clusterIn("b", "shop", ferryv1alpha1.OffloadingPending, metav1.ConditionUnknown, ReasonWaitingForProvider, "")
	ready := clusterIn("b", "shop", ferryv1alpha1.OffloadingReady, metav1.ConditionTrue, ReasonReady, "")
	for name, tc := range map[string]struct {
		clusters []ferryv1alpha1.ClusterOffloadingStatus
		selected []ferryv1alpha1.ClusterID
		want     bool
	}{
		"the only selected cluster refused":                {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a")}, ids("a"), true},
		"both selected clusters refused":                   {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a"), failed("b")}, ids("a", "b"), true},
		"one refused, one Ready":                           {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a"), ready}, ids("a", "b"), false},
		"one refused, one not answered yet":                {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a"), pending}, ids("a", "b"), false},
		"a selected cluster not asked yet":                 {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a")}, ids("a", "b"), false},
		"the refusing cluster is no longer selected":       {[]ferryv1alpha1.ClusterOffloadingStatus{failed("a"), ready}, ids("b"), false},
		"nothing selected: waits for a provider, labelled": {nil, nil, false},
	} {
		if got := everySelectedFailed(tc.clusters, tc.selected); got != tc.want {
			t.Errorf("%s: everySelectedFailed = %t, want %t", name, got, tc.want)
		}
	}
}
