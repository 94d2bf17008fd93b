package reflection

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writeLog holds what a reflector last wrote or deleted on the provider,
// until its informer catches up, so a change arriving meanwhile is compared
// with it (and not created twice, nor fought).
type writeLog struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]written
}

// written is a copy that was written, or deleted.
type written struct {
	obj     client.Object
	deleted bool
}

func newWriteLog() *writeLog {
	return &writeLog{entries: map[types.NamespacedName]written{}}
}

// remember records obj as written (deleted: as deleted) at key.
func (l *writeLog) remember(key types.NamespacedName, obj client.Object, deleted bool) {
	l.mu.Lock()
	l.entries[key] = written{obj: obj, deleted: deleted}
	l.mu.Unlock()
}

// current is the provider's copy at key: cached, as the informer last saw
// it (nil: none), or what was written when the informer has not seen that
// yet. An entry the informer caught up with is forgotten.
func (l *writeLog) current(key types.NamespacedName, cached client.Object) client.Object {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.entries[key]
	switch {
	case !ok:
		return cached
	case cached != nil && newer(cached, w.obj):
		// The informer caught up (or someone wrote after us).
		delete(l.entries, key)
		return cached
	case w.deleted:
		if cached == nil {
			delete(l.entries, key)
		}
		return nil
	case cached != nil && cached.GetResourceVersion() == w.obj.GetResourceVersion():
		delete(l.entries, key)
		return cached
	}
	return w.obj
}

// seenDeleted notes that the informer saw the copy at key deleted, gone
// being its last state: what was written at or before that state is gone
// too. Without it, a write the informer saw just before the deletion (both
// events handled in one sync) would stand for a copy that no longer exists.
func (l *writeLog) seenDeleted(key types.NamespacedName, gone client.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.entries[key]; ok && !newer(w.obj, gone) {
		delete(l.entries, key)
	}
}

// newer tells whether a's resourceVersion is after b's; resource versions
// of one resource are comparable integers on every API server ferry
// supports, and anything else counts as not newer.
func newer(a, b client.Object) bool {
	if b == nil {
		return true
	}
	av, err1 := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	bv, err2 := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	return err1 == nil && err2 == nil && av > bv
}
