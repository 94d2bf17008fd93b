package offloading

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// The virtual kubelet records a real pod lost from under its ShadowPod only
// when its local pod's status came from that pod and the provider has no
// record of a pod yet.
func TestLostRemotePod(t *testing.T) {
	withReason := func(reason string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: ferryv1alpha1.PodConditionOffloaded, Reason: reason}}}}
	}
	shadow := func(change func(*ferryv1alpha1.ShadowPod)) *ferryv1alpha1.ShadowPod {
		sp := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop-home"}}
		if change != nil {
			change(sp)
		}
		return sp
	}
	tests := []struct {
		name   string
		local  *corev1.Pod
		shadow *ferryv1alpha1.ShadowPod
		want   bool
	}{
		{"ran remotely, no record", withReason(ReasonRunningRemotely), shadow(nil), true},
		{"held remotely, no record", withReason(ReasonPendingRemotely), shadow(nil), true},
		{"never had a remote pod", withReason(ReasonShadowPodRejected), shadow(nil), false},
		{"no status yet", &corev1.Pod{}, shadow(nil), false},
		{"provider recorded the pod", withReason(ReasonRunningRemotely), shadow(func(sp *ferryv1alpha1.ShadowPod) { sp.Status.PodName = "web-0" }), false},
		{"already recorded lost", withReason(ReasonRunningRemotely), shadow(func(sp *ferryv1alpha1.ShadowPod) {
			sp.Annotations = map[string]string{ferryv1alpha1.AnnotationPodLost: "true"}
		}), false},
		{"ShadowPod deleted", withReason(ReasonRunningRemotely), shadow(func(sp *ferryv1alpha1.ShadowPod) { sp.DeletionTimestamp = &metav1.Time{} }), false},
	}
	for _, tt := range tests {
		if got := lostRemotePod(tt.local, tt.shadow); got != tt.want {
			t.Errorf("%s: lostRemotePod = %t, want %t", tt.name, got, tt.want)
		}
	}
}

func TestRecordLostPodAnnotatesTheShadowPod(t *testing.T) {
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	sp := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop-home", Labels: map[string]string{"keep": "me"}}}
	remote := fake.NewClientBuilder().WithScheme(s).WithObjects(sp).Build()
	c := &controller{remote: remote}
	if err := c.recordLostPod(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"}}, sp); err != nil {
		t.Fatal(err)
	}
	var got ferryv1alpha1.ShadowPod
	if err := remote.Get(t.Context(), client.ObjectKeyFromObject(sp), &got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[ferryv1alpha1.AnnotationPodLost] != "true" || got.Labels["keep"] != "me" {
		t.Fatalf("ShadowPod metadata %+v: want %s and its labels kept", got.ObjectMeta, ferryv1alpha1.AnnotationPodLost)
	}
	if lostRemotePod(&corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: ferryv1alpha1.PodConditionOffloaded, Reason: ReasonRunningRemotely}}}}, &got) {
		t.Fatal("a ShadowPod recorded lost is recorded again")
	}
}
