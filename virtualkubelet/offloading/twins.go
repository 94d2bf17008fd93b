package offloading

import (
	"context"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// twin is one twin namespace on the provider and the watches on it: the
// consumer's credential reaches its twin namespaces only, so each gets its
// own ShadowPod and pod informers, selected by this consumer's origin label.
type twin struct {
	local, name string
	// ready: new pods may be offloaded (the twin namespace is Ready); a
	// Terminating one is still watched, to drain it. Workers read it while
	// refresh writes it.
	ready atomic.Bool

	cancel         context.CancelFunc
	shadows, pods  cache.Indexer
	shadowsSynced  cache.InformerSynced
	podsSynced     cache.InformerSynced
	shadowInformer cache.SharedIndexInformer
	podInformer    cache.SharedIndexInformer
}

func (t *twin) synced() bool { return t.shadowsSynced() && t.podsSynced() }

// shadowPod is the ShadowPod for the local pod name, or nil.
func (t *twin) shadowPod(name string) *ferryv1alpha1.ShadowPod {
	obj, ok, _ := t.shadows.GetByKey(t.name + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*ferryv1alpha1.ShadowPod)
}

// remotePod is the real pod for the local pod name, or nil.
func (t *twin) remotePod(name string) *corev1.Pod {
	obj, ok, _ := t.pods.GetByKey(t.name + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*corev1.Pod)
}

// twins follows the consumer's NamespaceOffloadings and keeps one twin per
// local namespace offloaded to this provider.
type twins struct {
	provider ferryv1alpha1.ClusterID
	consumer ferryv1alpha1.ClusterID
	remote   client.WithWatch
	enqueue  func(types.NamespacedName)
	// namespaceChanged is called with a local namespace whose twin appeared,
	// changed readiness or went away.
	namespaceChanged func(namespace string)

	mu      sync.RWMutex
	byLocal map[string]*twin
	byTwin  map[string]*twin
}

func (ts *twins) forLocal(namespace string) *twin {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byLocal[namespace]
}

func (ts *twins) forTwin(namespace string) *twin {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	return ts.byTwin[namespace]
}

// refresh brings the twins in line with the NamespaceOffloadings in store.
func (ts *twins) refresh(ctx context.Context, store cache.Store) {
	want := map[string]ferryv1alpha1.ClusterOffloadingStatus{}
	for _, obj := range store.List() {
		nso, ok := obj.(*ferryv1alpha1.NamespaceOffloading)
		if !ok {
			continue
		}
		for _, c := range nso.Status.Clusters {
			if c.ClusterID != ts.provider || c.TwinNamespace == "" {
				continue
			}
			if c.Phase == ferryv1alpha1.OffloadingReady || c.Phase == ferryv1alpha1.OffloadingTerminating {
				want[nso.Namespace] = c
			}
		}
	}
	var changed []string
	ts.mu.Lock()
	if ts.byLocal == nil {
		ts.byLocal, ts.byTwin = map[string]*twin{}, map[string]*twin{}
	}
	for local, t := range ts.byLocal {
		c, ok := want[local]
		if ok && c.TwinNamespace == t.name {
			continue
		}
		t.cancel()
		delete(ts.byLocal, local)
		delete(ts.byTwin, t.name)
		changed = append(changed, local)
		klog.FromContext(ctx).Info("Stopped following twin namespace", "namespace", local, "twinNamespace", t.name)
	}
	for local, c := range want {
		ready := c.Phase == ferryv1alpha1.OffloadingReady
		if t, ok := ts.byLocal[local]; ok {
			if t.ready.Swap(ready) != ready {
				changed = append(changed, local)
			}
			continue
		}
		t := ts.start(ctx, local, c.TwinNamespace)
		t.ready.Store(ready)
		ts.byLocal[local], ts.byTwin[c.TwinNamespace] = t, t
		changed = append(changed, local)
		klog.FromContext(ctx).Info("Following twin namespace", "namespace", local, "twinNamespace", c.TwinNamespace, "ready", ready)
	}
	ts.mu.Unlock()
	for _, ns := range changed {
		ts.namespaceChanged(ns)
	}
}

// start runs the informers of one twin namespace until it is dropped.
func (ts *twins) start(ctx context.Context, local, name string) *twin {
	ctx, cancel := context.WithCancel(ctx)
	selector := ferryv1alpha1.LabelOriginCluster + "=" + string(ts.consumer)
	t := &twin{local: local, name: name, cancel: cancel}
	t.shadowInformer = ts.informer(ctx, name, selector, &ferryv1alpha1.ShadowPod{}, &ferryv1alpha1.ShadowPodList{})
	t.podInformer = ts.informer(ctx, name, selector, &corev1.Pod{}, &corev1.PodList{})
	t.shadows, t.shadowsSynced = t.shadowInformer.GetIndexer(), t.shadowInformer.HasSynced
	t.pods, t.podsSynced = t.podInformer.GetIndexer(), t.podInformer.HasSynced
	go t.shadowInformer.RunWithContext(ctx)
	go t.podInformer.RunWithContext(ctx)
	return t
}

// informer watches one kind in one twin namespace; every event wakes the
// local pod of the same name.
func (ts *twins) informer(ctx context.Context, namespace, selector string, obj client.Object, list client.ObjectList) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			err := ts.remote.List(ctx, l, &client.ListOptions{Namespace: namespace, Raw: withSelector(opts, selector)})
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			l := list.DeepCopyObject().(client.ObjectList)
			return ts.remote.Watch(ctx, l, &client.ListOptions{Namespace: namespace, Raw: withSelector(opts, selector)})
		},
	}
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	_ = inf.SetTransform(DropManagedFields)
	wake := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if m, ok := o.(metav1.Object); ok {
			if t := ts.forTwin(m.GetNamespace()); t != nil {
				ts.enqueue(types.NamespacedName{Namespace: t.local, Name: m.GetName()})
			}
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, o any) { wake(o) },
		DeleteFunc: wake,
	})
	return inf
}

func withSelector(opts metav1.ListOptions, selector string) *metav1.ListOptions {
	opts.LabelSelector = selector
	opts.FieldSelector = fields.Everything().String()
	return &opts
}
