package offloading

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pendingQuiet is how long a pod whose remote copy is Pending for a reason
// worth telling (unschedulable, an image that cannot be pulled, …) goes
// without a status write: most remote pods are Running within it, so their
// way there (created, scheduled, Running) costs one status write instead of
// one per remote change. A pod still Pending after it gets its status, with
// the provider's reason, then.
const pendingQuiet = 2 * time.Second

// pendingStartQuiet is the same for a remote copy Pending only on its
// ordinary way to Running (queued for the provider's scheduler, containers
// being created): it says nothing a user acts on, and in a burst many
// remote pods stay queued longer than pendingQuiet, which cost each of
// them a write more (1.5–1.6 status writes per pod instead of 1 at 1,000
// pods). A reason worth telling that shows up meanwhile is written once
// pendingQuiet has passed.
const pendingStartQuiet = 10 * time.Second

// pendingQuietFor is the quiet period of a pod whose remote copy is remote.
func pendingQuietFor(remote *corev1.Pod) time.Duration {
	if _, warn := pendingReason(remote); warn {
		return pendingQuiet
	}
	return pendingStartQuiet
}

// pendingClock remembers when each pod's remote copy was first seen
// Pending, for the quiet period. It holds only pods in that period.
type pendingClock struct {
	mu    sync.Mutex
	since map[types.NamespacedName]pendingSince
	now   func() time.Time
}

type pendingSince struct {
	uid types.UID
	at  time.Time
}

func newPendingClock() *pendingClock {
	return &pendingClock{since: map[types.NamespacedName]pendingSince{}, now: time.Now}
}

// wait is how much longer the pod key (of uid) stays quiet, for a quiet
// period of quiet from when it was first seen Pending; zero once it is over,
// when it is forgotten.
func (p *pendingClock) wait(key types.NamespacedName, uid types.UID, quiet time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	s, ok := p.since[key]
	if !ok || s.uid != uid {
		s = pendingSince{uid: uid, at: now}
		p.since[key] = s
	}
	if left := quiet - now.Sub(s.at); left > 0 {
		return left
	}
	delete(p.since, key)
	return 0
}

// forget drops the pod key: it is no longer Pending, or gone.
func (p *pendingClock) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, key)
}
