package offloading

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// pendingQuiet is how long a pod whose remote copy is Pending goes without
// a status write: most remote pods are Running within it, so their way
// there (created, scheduled, Running) costs one status write instead of
// one per remote change. A pod still Pending after it gets its status, with
// the provider's reason, then.
const pendingQuiet = 2 * time.Second

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

// wait is how much longer the pod key (of uid) stays quiet; zero once its
// quiet period is over, when it is forgotten.
func (p *pendingClock) wait(key types.NamespacedName, uid types.UID) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	s, ok := p.since[key]
	if !ok || s.uid != uid {
		s = pendingSince{uid: uid, at: now}
		p.since[key] = s
	}
	if left := pendingQuiet - now.Sub(s.at); left > 0 {
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
