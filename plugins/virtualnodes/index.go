// Package virtualnodes is the scheduler plugins' view of ferry's virtual
// nodes: which nodes are virtual, which provider each stands for, and the
// node-shape summary each publishes, parsed once per change rather than once
// per scheduling attempt. It is fed by the scheduler's shared Node informer
// and holds only virtual nodes, so its size is the number of peers, not of
// nodes.
package virtualnodes

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Node is one virtual node as the index holds it.
type Node struct {
	// Node is the object last seen by the informer (read only).
	Node *corev1.Node
	// Cluster is the provider behind the node.
	Cluster ferryv1alpha1.ClusterID
	// Shapes summarizes the provider's free real nodes; see ShapesKnown.
	Shapes []ferryv1alpha1.NodeShape
	// ShapesKnown is false when the node publishes no summary.
	ShapesKnown bool
	// ShapesErr is set when the summary does not parse.
	ShapesErr error

	rawShapes string
}

// Index holds the virtual nodes the informer has seen.
type Index struct {
	mu     sync.RWMutex
	byName map[string]*Node
	// sorted lists the virtual nodes by name, rebuilt on change.
	sorted []*Node
}

// New returns an index fed by informer, a Node informer (the scheduler's
// shared one); it fills as the informer syncs.
func New(informer cache.SharedIndexInformer) (*Index, error) {
	x := &Index{byName: map[string]*Node{}}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { x.upsert(obj) },
		UpdateFunc: func(_, obj any) { x.upsert(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				x.remove(n.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch nodes for virtual nodes: %w", err)
	}
	return x, nil
}

// NewStatic returns an index holding nodes (the virtual ones among them):
// for tests and tools that have no informer.
func NewStatic(nodes ...*corev1.Node) *Index {
	x := &Index{byName: map[string]*Node{}}
	for _, n := range nodes {
		x.upsert(n)
	}
	return x
}

func (x *Index) upsert(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if !placement.IsVirtualNode(n) {
		x.remove(n.Name) // the label may have been removed
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	entry := &Node{Node: n, Cluster: placement.NodeCluster(n)}
	raw, known := n.Annotations[ferryv1alpha1.AnnotationNodeShapes]
	if old, ok := x.byName[n.Name]; ok && old.ShapesKnown == known && old.rawShapes == raw {
		entry.Shapes, entry.ShapesKnown, entry.ShapesErr, entry.rawShapes = old.Shapes, old.ShapesKnown, old.ShapesErr, old.rawShapes
	} else {
		entry.Shapes, entry.ShapesKnown, entry.ShapesErr = ParseShapes(raw, known)
		entry.rawShapes = raw
	}
	_, existed := x.byName[n.Name]
	x.byName[n.Name] = entry
	if existed {
		i := slices.IndexFunc(x.sorted, func(e *Node) bool { return e.Node.Name == n.Name })
		x.sorted = slices.Clone(x.sorted) // readers may hold the old slice
		x.sorted[i] = entry
		return
	}
	x.sorted = append(slices.Clone(x.sorted), entry)
	slices.SortFunc(x.sorted, func(a, b *Node) int {
		switch {
		case a.Node.Name < b.Node.Name:
			return -1
		case a.Node.Name > b.Node.Name:
			return 1
		}
		return 0
	})
}

func (x *Index) remove(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byName[name]; !ok {
		return
	}
	delete(x.byName, name)
	x.sorted = slices.DeleteFunc(slices.Clone(x.sorted), func(e *Node) bool { return e.Node.Name == name })
}

// List returns the virtual nodes, sorted by name. The slice is shared:
// callers must not modify it.
func (x *Index) List() []*Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.sorted
}

// Get returns the virtual node called name, or nil.
func (x *Index) Get(name string) *Node {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byName[name]
}

// Shapes returns the node-shape summary node publishes, from the index when
// the index saw the same annotation, parsed now otherwise (the scheduler's
// snapshot may be newer or older than the informer).
func (x *Index) Shapes(node *corev1.Node) (shapes []ferryv1alpha1.NodeShape, known bool, err error) {
	raw, known := node.Annotations[ferryv1alpha1.AnnotationNodeShapes]
	if e := x.Get(node.Name); e != nil && e.ShapesKnown == known && e.rawShapes == raw {
		return e.Shapes, e.ShapesKnown, e.ShapesErr
	}
	return ParseShapes(raw, known)
}

// ParseShapes parses the value of the ferry.io/node-shapes annotation;
// present says whether the node has the annotation at all.
func ParseShapes(raw string, present bool) ([]ferryv1alpha1.NodeShape, bool, error) {
	if !present {
		return nil, false, nil
	}
	var shapes []ferryv1alpha1.NodeShape
	if err := json.Unmarshal([]byte(raw), &shapes); err != nil {
		return nil, true, fmt.Errorf("annotation %s: %w", ferryv1alpha1.AnnotationNodeShapes, err)
	}
	return shapes, true, nil
}
