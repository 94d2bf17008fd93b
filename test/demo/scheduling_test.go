package demo

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestSchedulerDecisionsPairEachPodWithItsSchedulersLatestWord(t *testing.T) {
	base := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: SchedulerNamespace, UID: types.UID(name + "-uid")},
			Spec: corev1.PodSpec{NodeName: node, SchedulerName: SchedulerName}}
	}
	event := func(name, pod, reason, by string, at time.Duration) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: SchedulerNamespace},
			InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Name: pod, UID: types.UID(pod + "-uid")},
			Reason:              reason,
			Message:             reason + " by " + by,
			ReportingController: by,
			EventTime:           metav1.NewMicroTime(base.Add(at))}
	}
	c := fake.NewClientBuilder().WithObjects(
		pod("bound", "ferry-provider"),
		pod("pending", ""),
		// Bound after failing once: until its Scheduled event is seen it
		// has no decision to show.
		pod("bound-no-event-yet", "ferry-provider"),
		pod("never-tried", ""),
		// Bound, then pending in the provider: the provider scheduler's
		// FailedScheduling, reflected later, does not hide its Scheduled.
		pod("pending-remotely", "ferry-provider"),
		event("e1", "bound", reasonScheduled, SchedulerName, time.Second),
		event("e2", "pending", reasonFailedScheduling, SchedulerName, time.Second),
		event("e3", "pending", reasonFailedScheduling, SchedulerName+"-later", 3*time.Second),
		event("e4", "pending", "Preempted", "someone", 5*time.Second),
		event("e5", "bound-no-event-yet", reasonFailedScheduling, SchedulerName, time.Second),
		event("e6", "pending-remotely", reasonScheduled, SchedulerName, time.Second),
		event("e7", "pending-remotely", reasonFailedScheduling, "default-scheduler", 2*time.Second),
	).Build()

	got, err := schedulerDecisions(context.Background(), &clients{ctrl: c}, SchedulerNamespace)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bound": "Scheduled by ferry-scheduler", "pending": "FailedScheduling by ferry-scheduler-later",
		"pending-remotely": "Scheduled by ferry-scheduler"}
	if len(got) != len(want) {
		var names []string
		for _, d := range got {
			names = append(names, d.pod.Name+": "+d.event.Message)
		}
		t.Fatalf("got %d decisions, want %d: %q", len(got), len(want), names)
	}
	for _, d := range got {
		if d.event.Message != want[d.pod.Name] {
			t.Errorf("pod %s: event %q, want %q", d.pod.Name, d.event.Message, want[d.pod.Name])
		}
	}
	if got[0].pod.Name != "bound" {
		t.Errorf("decisions not sorted by pod name: first is %s", got[0].pod.Name)
	}
}
