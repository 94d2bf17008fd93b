// Package virtualnodes is the scheduler plugins' view of ferry's virtual
// nodes: which nodes are virtual, which provider each stands for, and the
// node-shape summary each publishes, parsed once per change rather than once
// per scheduling attempt. It indexes the scheduler's shared Node informer,
// whose store is updated before any event handler runs, so a pod the queue
// moves on a node event sees that node here.
package virtualnodes

import (
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// indexName is the index ferry adds to the Node informer: every virtual node
// under allKey and under its cluster's key.
const (
	indexName = "ferry.io/virtual-nodes"
	allKey    = "*"
)

func indexFunc(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok || !placement.IsVirtualNode(n) {
		return nil, nil
	}
	return []string{allKey, "cluster/" + string(placement.NodeCluster(n))}, nil
}

// Index finds virtual nodes and parses their summaries.
type Index struct {
	indexer cache.Indexer

	mu      sync.Mutex
	shapes  map[string]parsed        // by node name
	classes map[string]parsedClasses // by node name
}

// parsedClasses memoizes a node's storage classes annotation.
type parsedClasses struct {
	raw     string
	classes []ferryv1alpha1.VirtualNodeStorageClass
	err     error
}

type parsed struct {
	raw    string
	known  bool
	shapes []ferryv1alpha1.NodeShape
	err    error
}

// New indexes informer, a Node informer (the scheduler's shared one). Plugins
// of several profiles share the index.
func New(informer cache.SharedIndexInformer) (*Index, error) {
	if _, ok := informer.GetIndexer().GetIndexers()[indexName]; !ok {
		if err := informer.AddIndexers(cache.Indexers{indexName: indexFunc}); err != nil {
			return nil, fmt.Errorf("index virtual nodes: %w", err)
		}
	}
	return &Index{indexer: informer.GetIndexer(), shapes: map[string]parsed{}, classes: map[string]parsedClasses{}}, nil
}

// NewStatic returns an index holding nodes: for tests and tools that have
// no informer.
func NewStatic(nodes ...*corev1.Node) *Index {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{indexName: indexFunc})
	for _, n := range nodes {
		if err := indexer.Add(n); err != nil {
			panic(err) // a node without a name
		}
	}
	return &Index{indexer: indexer, shapes: map[string]parsed{}, classes: map[string]parsedClasses{}}
}

func (x *Index) byIndex(key string) []*corev1.Node {
	objs, err := x.indexer.ByIndex(indexName, key)
	if err != nil {
		return nil // the index exists: New added it
	}
	out := make([]*corev1.Node, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*corev1.Node))
	}
	return out
}

// List returns the virtual nodes (read only), in no particular order.
func (x *Index) List() []*corev1.Node { return x.byIndex(allKey) }

// InCluster returns the virtual nodes of provider id (read only).
func (x *Index) InCluster(id ferryv1alpha1.ClusterID) []*corev1.Node {
	return x.byIndex("cluster/" + string(id))
}

// Shapes returns the node-shape summary node publishes (known is false
// when it publishes none), parsed once per distinct annotation value.
func (x *Index) Shapes(node *corev1.Node) (shapes []ferryv1alpha1.NodeShape, known bool, err error) {
	raw, present := node.Annotations[ferryv1alpha1.AnnotationNodeShapes]
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.shapes[node.Name]; ok && p.known == present && p.raw == raw {
		return p.shapes, p.known, p.err
	}
	shapes, known, err = ParseShapes(raw, present)
	x.shapes[node.Name] = parsed{raw: raw, known: known, shapes: shapes, err: err}
	return shapes, known, err
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

// StorageClasses are the storage classes a virtual node's provider serves
// claims with (placement.NodeStorageClasses), parsed once per annotation
// value, so a Filter reading them stays O(1).
func (x *Index) StorageClasses(node *corev1.Node) ([]ferryv1alpha1.VirtualNodeStorageClass, error) {
	raw := node.Annotations[ferryv1alpha1.AnnotationStorageClasses]
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.classes[node.Name]; ok && p.raw == raw {
		return p.classes, p.err
	}
	classes, _, err := placement.NodeStorageClasses(node)
	x.classes[node.Name] = parsedClasses{raw: raw, classes: classes, err: err}
	return classes, err
}
