package offloading

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestDeletionCostRidesOnTheStatusWrites: over an offloaded pod's life
// (pending remotely, then running), the virtual kubelet writes the local
// pod exactly as often with a placement preference as without: the
// pod-deletion-cost goes in the status writes it makes anyway, never in a
// write of its own, and the ShadowPod's template does not change with it.
func TestDeletionCostRidesOnTheStatusWrites(t *testing.T) {
	lifecycle := func(t *testing.T, pref ferryv1alpha1.PlacementPreference, annotations map[string]string) (writes []k8stesting.UpdateAction, final *corev1.Pod) {
		t.Helper()
		pod := boundPod()
		for k, v := range annotations {
			pod.Annotations[k] = v
		}
		pod.Status.Phase = corev1.PodPending
		c := newTestController(t, pod, nil)
		c.twins = &twins{preferences: map[string]nsPreference{pod.Namespace: {strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, preference: pref}}}
		remote := pod.DeepCopy()
		remote.Namespace = "shop-twin"
		for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodRunning} {
			remote.Status.Phase = phase
			local, err := c.local.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.writeStatus(t.Context(), local, statusFromRemote(local, remote, 0, "provider", nil))
		}
		for _, a := range c.local.(interface{ Actions() []k8stesting.Action }).Actions() {
			if u, ok := a.(k8stesting.UpdateAction); ok {
				writes = append(writes, u)
			} else if a.GetVerb() != "get" {
				t.Errorf("unexpected %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
			}
		}
		final, err := c.local.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			if w.GetSubresource() != "status" {
				t.Errorf("a write of pods/%s, want pods/status only", w.GetSubresource())
			}
		}
		return writes, final
	}
	none, _ := lifecycle(t, ferryv1alpha1.PlacementPreferenceNone, nil)
	for _, tc := range []struct {
		pref        ferryv1alpha1.PlacementPreference
		annotations map[string]string
		want        string
	}{
		{ferryv1alpha1.PlacementPreferenceLocalFirst, nil, "-100"},
		{ferryv1alpha1.PlacementPreferenceRemoteFirst, nil, "100"},
		{ferryv1alpha1.PlacementPreferenceLocalFirst, map[string]string{placement.AnnotationPodDeletionCost: "42"}, "42"}, // the user's
		{ferryv1alpha1.PlacementPreferenceNone, nil, ""},
	} {
		writes, final := lifecycle(t, tc.pref, tc.annotations)
		t.Logf("%s: %d writes of the local pod (None: %d)", tc.pref, len(writes), len(none))
		if len(writes) != len(none) || len(writes) != 2 {
			t.Errorf("%s: %d writes, None %d; want 2 each (pending, running)", tc.pref, len(writes), len(none))
		}
		if got := final.Annotations[placement.AnnotationPodDeletionCost]; got != tc.want {
			t.Errorf("%s: pod-deletion-cost %q, want %q", tc.pref, got, tc.want)
		}
		if first := writes[0].GetObject().(*corev1.Pod); first.Annotations[placement.AnnotationPodDeletionCost] != tc.want {
			t.Errorf("%s: the first status write carries cost %q, want %q", tc.pref, first.Annotations[placement.AnnotationPodDeletionCost], tc.want)
		}
		before, err := ShadowPodFor(boundPod(), "consumer", "shop-twin", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		withCost := boundPod()
		withCost.Annotations = final.Annotations
		after, err := ShadowPodFor(withCost, "consumer", "shop-twin", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameTemplate := before.Annotations[AnnotationTemplateHash] == after.Annotations[AnnotationTemplateHash]
		if userCost := tc.annotations != nil; sameTemplate == userCost {
			t.Errorf("%s: ShadowPod template unchanged %v; want it to change only for a user's own cost", tc.pref, sameTemplate)
		}
	}
}

// TestPreferenceChangeRewritesFerrysCostOnly: with the preference back to
// None, ferry's cost is removed (one write), and a user's is left alone.
func TestPreferenceChangeRewritesFerrysCostOnly(t *testing.T) {
	for _, tc := range []struct {
		annotations map[string]string
		writes      int
		want        string
	}{
		{map[string]string{placement.AnnotationPodDeletionCost: "-100", placement.AnnotationDeletionCostSet: "-100"}, 1, ""},
		{map[string]string{placement.AnnotationPodDeletionCost: "42"}, 0, "42"},
	} {
		pod := boundPod()
		for k, v := range tc.annotations {
			pod.Annotations[k] = v
		}
		c := newTestController(t, pod, nil)
		c.twins = &twins{preferences: map[string]nsPreference{pod.Namespace: {strategy: ferryv1alpha1.PodOffloadingLocalAndRemote, preference: ferryv1alpha1.PlacementPreferenceNone}}}
		c.writeStatus(t.Context(), pod, pod.Status)
		got, err := c.local.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		writes := 0
		for _, a := range c.local.(interface{ Actions() []k8stesting.Action }).Actions() {
			if a.GetVerb() == "update" {
				writes++
			}
		}
		if writes != tc.writes || got.Annotations[placement.AnnotationPodDeletionCost] != tc.want {
			t.Errorf("%v: %d writes, cost %q; want %d, %q", tc.annotations, writes, got.Annotations[placement.AnnotationPodDeletionCost], tc.writes, tc.want)
		}
	}
}
