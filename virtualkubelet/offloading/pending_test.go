package offloading

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestPendingClock(t *testing.T) {
	now := time.Unix(1000, 0)
	p := newPendingClock()
	p.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "ns", Name: "web"}

	if got := p.wait(key, "uid-1"); got != pendingQuiet {
		t.Fatalf("first sighting waits %s, want the whole quiet period %s", got, pendingQuiet)
	}
	now = now.Add(pendingQuiet / 2)
	if got := p.wait(key, "uid-1"); got != pendingQuiet/2 {
		t.Fatalf("halfway waits %s, want %s", got, pendingQuiet/2)
	}
	if got := p.wait(key, "uid-2"); got != pendingQuiet {
		t.Fatalf("a new pod of the same name waits %s, want its own quiet period %s", got, pendingQuiet)
	}
	now = now.Add(pendingQuiet)
	if got := p.wait(key, "uid-2"); got != 0 {
		t.Fatalf("after the quiet period waits %s, want 0", got)
	}
	if len(p.since) != 0 {
		t.Fatalf("a pod past its quiet period is still held: %v", p.since)
	}
	p.wait(key, "uid-3")
	p.forget(key)
	if len(p.since) != 0 {
		t.Fatalf("a forgotten pod is still held: %v", p.since)
	}
}
