package webhooks

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestPodAnnotationWarnerAdmitsAndSaysWhyAPlacementAnnotationHasNoEffect(t *testing.T) {
	failed := nsoIn("conflict", ferryv1alpha1.PodOffloadingRemote)
	failed.Status.Conditions = []metav1.Condition{{Type: ferryv1alpha1.NamespaceOffloadingReady, Status: metav1.ConditionFalse,
		Reason: "NamespaceConflict", Message: "failed: eu (Failed, NamespaceConflict: namespace conflict exists)"}}
	deleting := nsoIn("leaving", ferryv1alpha1.PodOffloadingRemote)
	deleting.Finalizers = []string{ferryv1alpha1.NamespaceOffloadingFinalizer}
	deleting.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
	w := &PodAnnotationWarner{Reader: fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(failed, deleting).Build()}
	remote := map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}
	for name, tc := range map[string]struct {
		namespace   string
		annotations map[string]string
		want        []string // fragments, one warning each, in order
	}{
		"no NamespaceOffloading": {"plain", remote, []string{
			`metadata.annotations[ferry.io/pod-offloading-strategy]: "Remote" has no effect: namespace plain is not offloaded (it has no NamespaceOffloading): the pod runs on this cluster's nodes`}},
		"a failed NamespaceOffloading": {"conflict", remote, []string{
			"is not labelled ferry.io/offloading-enabled, its NamespaceOffloading conflict/offloading is not in force (NamespaceConflict: failed: eu"}},
		"a NamespaceOffloading being deleted": {"leaving", remote, []string{"namespace leaving is being unoffloaded"}},
		"both pod annotations": {"plain", map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote", ferryv1alpha1.AnnotationConsumerAPIServer: "false"},
			[]string{`metadata.annotations[ferry.io/consumer-api-server]: "false" has no effect`, `metadata.annotations[ferry.io/pod-offloading-strategy]: "Remote" has no effect`}},
		"no ferry annotation": {"plain", map[string]string{"team": "shop"}, nil},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: tc.annotations}}
		resp := w.Handle(context.Background(), admissionRequest(admissionv1.Create, tc.namespace, pod, nil))
		if !resp.Allowed || len(resp.Patches) != 0 {
			t.Errorf("%s: allowed %v with %d patches, want admitted unchanged", name, resp.Allowed, len(resp.Patches))
		}
		if len(resp.Warnings) != len(tc.want) {
			t.Errorf("%s: warnings %q, want %d", name, resp.Warnings, len(tc.want))
			continue
		}
		for i, want := range tc.want {
			if !strings.Contains(resp.Warnings[i], want) {
				t.Errorf("%s: warning %d = %q, want it to contain %q", name, i, resp.Warnings[i], want)
			}
		}
	}
}

func TestPodMutatorWarnsAboutAStrategyAnnotationThatNarrowsNothing(t *testing.T) {
	objs := []client.Object{nsoIn("remote", ferryv1alpha1.PodOffloadingRemote), nsoIn("both", ferryv1alpha1.PodOffloadingLocalAndRemote)}
	m := &PodMutator{Reader: fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).Build()}
	for name, tc := range map[string]struct {
		namespace, asked string
		warn             bool
	}{
		"Remote in a Remote namespace":                 {"remote", "Remote", true},
		"LocalAndRemote in a LocalAndRemote namespace": {"both", "LocalAndRemote", true},
		"Remote in a LocalAndRemote namespace narrows": {"both", "Remote", false},
		"Local in a LocalAndRemote namespace narrows":  {"both", "Local", false},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: tc.asked}}}
		resp := m.Handle(context.Background(), admissionRequest(admissionv1.Create, tc.namespace, pod, nil))
		if !resp.Allowed {
			t.Errorf("%s: denied: %v", name, resp.Result)
			continue
		}
		got := len(resp.Warnings) == 1 && strings.Contains(resp.Warnings[0], `"`+tc.asked+`" has no effect: it is namespace `+tc.namespace+`'s podOffloadingStrategy already`)
		if got != tc.warn || (!tc.warn && len(resp.Warnings) > 0) {
			t.Errorf("%s: warnings %q, want a no-effect warning: %v", name, resp.Warnings, tc.warn)
		}
	}
}
