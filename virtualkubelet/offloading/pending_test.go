package offloading

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPendingClock(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPendingClock()
	p.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "ns", Name: "web"}

	if got := p.wait(key, "uid-1", pendingQuiet); got != pendingQuiet {
		t.Fatalf("first sighting waits %s, want the whole quiet period %s", got, pendingQuiet)
	}
	now = now.Add(pendingQuiet / 2)
	if got := p.wait(key, "uid-1", pendingQuiet); got != pendingQuiet/2 {
		t.Fatalf("halfway waits %s, want %s", got, pendingQuiet/2)
	}
	if got := p.wait(key, "uid-2", pendingQuiet); got != pendingQuiet {
		t.Fatalf("a new pod of the same name waits %s, want its own quiet period %s", got, pendingQuiet)
	}
	now = now.Add(pendingQuiet)
	if got := p.wait(key, "uid-2", pendingQuiet); got != 0 {
		t.Fatalf("after the quiet period waits %s, want 0", got)
	}
	if len(p.since) != 0 {
		t.Fatalf("a pod past its quiet period is still held: %v", p.since)
	}
	p.wait(key, "uid-3", pendingQuiet)
	p.forget(key)
	if len(p.since) != 0 {
		t.Fatalf("a forgotten pod is still held: %v", p.since)
	}
}

// A remote pod Pending only on its way to Running (queued, containers being
// created) stays quiet longer than one Pending for a reason worth telling;
// such a reason showing up meanwhile ends the longer wait.
func TestPendingQuietFor(t *testing.T) {
	queued := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	creating := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	unschedulable := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}}
	pullError := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want time.Duration
	}{
		"queued":             {queued, pendingStartQuiet},
		"containers created": {creating, pendingStartQuiet},
		"unschedulable":      {unschedulable, pendingQuiet},
		"image not pulled":   {pullError, pendingQuiet},
	} {
		if got := pendingQuietFor(tc.pod); got != tc.want {
			t.Errorf("%s: quiet for %s, want %s", name, got, tc.want)
		}
	}

	now := time.Unix(1000, 0)
	p := newPendingClock()
	p.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	if got := p.wait(key, "uid-1", pendingQuietFor(queued)); got != pendingStartQuiet {
		t.Fatalf("a queued pod waits %s, want %s", got, pendingStartQuiet)
	}
	now = now.Add(pendingQuiet + time.Second)
	if got := p.wait(key, "uid-1", pendingQuietFor(queued)); got != pendingStartQuiet-pendingQuiet-time.Second {
		t.Fatalf("a pod still queued after %s waits %s, want the rest of %s", pendingQuiet+time.Second, got, pendingStartQuiet)
	}
	if got := p.wait(key, "uid-1", pendingQuietFor(unschedulable)); got != 0 {
		t.Fatalf("a pod found unschedulable after %s waits %s more, want its status written now", pendingQuiet+time.Second, got)
	}
}
