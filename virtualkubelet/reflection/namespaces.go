package reflection

import (
	"maps"
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// namespaces maps the consumer's namespaces offloaded to the provider to
// their twin namespaces, from the NamespaceOffloadings' status: only a Ready
// twin namespace receives reflected objects.
type namespaces struct {
	provider ferryv1alpha1.ClusterID

	mu      sync.RWMutex
	byLocal map[string]string
	byTwin  map[string]string
}

// twin is local's Ready twin namespace, or "".
func (n *namespaces) twin(local string) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byLocal[local]
}

// local is the local namespace twin stands for, or "".
func (n *namespaces) local(twin string) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byTwin[twin]
}

// locals lists the local namespaces with a Ready twin namespace.
func (n *namespaces) locals() []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return slices.Collect(maps.Keys(n.byLocal))
}

// twins lists the Ready twin namespaces.
func (n *namespaces) twins() []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return slices.Collect(maps.Keys(n.byTwin))
}

// change is one local namespace whose twin appeared or went away.
type change struct {
	local, twin string
	added       bool
}

// refresh reads the NamespaceOffloadings in store and reports what changed.
func (n *namespaces) refresh(store cache.Store) []change {
	want := map[string]string{}
	for _, obj := range store.List() {
		nso, ok := obj.(*ferryv1alpha1.NamespaceOffloading)
		if !ok {
			continue
		}
		for _, c := range nso.Status.Clusters {
			if c.ClusterID == n.provider && c.TwinNamespace != "" && c.Phase == ferryv1alpha1.OffloadingReady {
				want[nso.Namespace] = c.TwinNamespace
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var changes []change
	for local, twin := range n.byLocal {
		if want[local] != twin {
			changes = append(changes, change{local: local, twin: twin})
			delete(n.byLocal, local)
			delete(n.byTwin, twin)
		}
	}
	if n.byLocal == nil {
		n.byLocal, n.byTwin = map[string]string{}, map[string]string{}
	}
	for local, twin := range want {
		if _, ok := n.byLocal[local]; !ok {
			n.byLocal[local], n.byTwin[twin] = twin, local
			changes = append(changes, change{local: local, twin: twin, added: true})
		}
	}
	return changes
}
