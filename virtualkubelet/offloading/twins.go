package offloading

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// RemoteResources are the provider's resources the pod offloading watches:
// those a cluster-wide watch needs the consumer to list and watch everywhere.
func RemoteResources() []schema.GroupResource {
	return []schema.GroupResource{ferryv1alpha1.GroupVersion.WithResource("shadowpods").GroupResource(), corev1.Resource("pods")}
}

// remoteWatch is a ShadowPod informer and a pod informer on the provider,
// selected by this consumer's origin label: of one twin namespace, or of
// every namespace, shared by all twins.
type remoteWatch struct {
	cancel        context.CancelFunc
	shadows, pods cache.SharedIndexInformer
}

func (w *remoteWatch) synced() bool { return w.shadows.HasSynced() && w.pods.HasSynced() }

// twin is one twin namespace on the provider and the watch that covers it.
type twin struct {
	local, name string
	// ready: new pods may be offloaded (the twin namespace is Ready); a
	// Terminating one is still watched, to drain it. Workers read it while
	// refresh writes it.
	ready atomic.Bool
	// watch covers the twin namespace; restartWatches replaces it while
	// workers read it.
	watch atomic.Pointer[remoteWatch]
}

// view is t as one sync sees it (nil for nil), its watch pinned: a sync
// that found the watch synced reads that same cache to the end, even if
// restartWatches replaces it meanwhile with one still listing.
func (t *twin) view() *twinView {
	if t == nil {
		return nil
	}
	return &twinView{name: t.name, ready: t.ready.Load(), watch: t.watch.Load()}
}

// twinView is a twin at one moment (see view).
type twinView struct {
	name  string
	ready bool
	watch *remoteWatch
}

func (v *twinView) synced() bool { return v.watch.synced() }

// shadowPod is the ShadowPod for the local pod name, or nil.
func (v *twinView) shadowPod(name string) *ferryv1alpha1.ShadowPod {
	obj, ok, _ := v.watch.shadows.GetIndexer().GetByKey(v.name + "/" + name)
	if !ok {
		return nil
	}
	return obj.(*ferryv1alpha1.ShadowPod)
}

// remotePod is the real pod for the local pod name, or nil.
func (v *twinView) remotePod(name string) *corev1.Pod {
	obj, ok, _ := v.watch.pods.GetIndexer().GetByKey(v.name + "/" + name)
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
	// shared, in the cluster scope, is the one watch of every twin
	// namespace (started by startShared, replaced by restartWatches under
	// mu); nil: each twin has its own.
	shared *remoteWatch

	mu      sync.RWMutex
	byLocal map[string]*twin
	byTwin  map[string]*twin
	// whyNot says, per local namespace with a NamespaceOffloading but no
	// twin followed here, why its pods cannot be offloaded to this provider.
	whyNot map[string]string
	// preferences holds, per local namespace with a NamespaceOffloading,
	// its strategy and placement preference (the pods' deletion cost).
	preferences map[string]nsPreference
}

// nsPreference is what a namespace's pods' deletion cost depends on.
type nsPreference struct {
	strategy   ferryv1alpha1.PodOffloadingStrategy
	preference ferryv1alpha1.PlacementPreference
}

// preference is the placement preference pod is offloaded under: its
// namespace's, None when the pod narrows its strategy to Local or Remote
// or its namespace has no NamespaceOffloading (or ts is nil).
func (ts *twins) preference(pod *corev1.Pod) ferryv1alpha1.PlacementPreference {
	if ts == nil {
		return ferryv1alpha1.PlacementPreferenceNone
	}
	ts.mu.RLock()
	p, ok := ts.preferences[pod.Namespace]
	ts.mu.RUnlock()
	if !ok {
		return ferryv1alpha1.PlacementPreferenceNone
	}
	strategy, err := placement.PodStrategy(p.strategy, pod.Annotations)
	if err != nil {
		return ferryv1alpha1.PlacementPreferenceNone
	}
	return placement.Preference(strategy, p.preference)
}

// whyNotOffloaded says why the pods of namespace, which has no twin
// followed here, cannot be offloaded to this provider: the state of its
// NamespaceOffloading, or, without one, how to offload it.
func (ts *twins) whyNotOffloaded(namespace string) string {
	ts.mu.RLock()
	defer ts.mu.RUnlock()
	if msg, ok := ts.whyNot[namespace]; ok {
		return msg
	}
	return fmt.Sprintf("namespace %s has no Ready twin namespace in cluster %s: offload it with a NamespaceOffloading selecting that cluster", namespace, ts.provider)
}

// notOffloadedHere says why nso's pods cannot be offloaded to provider when
// nso has no Ready (nor Terminating) twin namespace there: the provider's
// refusal (e.g. NamespaceConflict) or its not answering yet, the
// NamespaceOffloading's own failure (e.g. InvalidClusterSelector), its not
// selecting the provider, or its deletion.
func notOffloadedHere(nso *ferryv1alpha1.NamespaceOffloading, provider ferryv1alpha1.ClusterID) string {
	name := nso.Namespace + "/" + nso.Name
	if nso.DeletionTimestamp != nil {
		return fmt.Sprintf("NamespaceOffloading %s is being deleted: namespace %s is being unoffloaded", name, nso.Namespace)
	}
	for _, c := range nso.Status.Clusters {
		if c.ClusterID != provider {
			continue
		}
		why := ""
		if ready := meta.FindStatusCondition(c.Conditions, ferryv1alpha1.ConditionReady); ready != nil {
			why = fmt.Sprintf(": %s (%s)", ready.Message, ready.Reason)
		}
		if c.Phase == ferryv1alpha1.OffloadingFailed {
			return fmt.Sprintf("NamespaceOffloading %s: cluster %s refused twin namespace %s%s", name, provider, c.TwinNamespace, why)
		}
		return fmt.Sprintf("NamespaceOffloading %s: twin namespace %s in cluster %s is %s%s", name, c.TwinNamespace, provider, c.Phase, why)
	}
	if ready := meta.FindStatusCondition(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingReady); ready != nil && ready.Status != metav1.ConditionTrue &&
		!meta.IsStatusConditionTrue(nso.Status.Conditions, ferryv1alpha1.NamespaceOffloadingClustersSelected) {
		return fmt.Sprintf("NamespaceOffloading %s does not offload to cluster %s: %s (%s)", name, provider, ready.Message, ready.Reason)
	}
	return fmt.Sprintf("NamespaceOffloading %s does not select cluster %s (spec.clusterSelector)", name, provider)
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

// restartWatches replaces every watch of the provider with a new one, which
// lists afresh. After an outage the old watches' caches still hold what the
// provider said before it (client-go resumes a broken watch only after a
// backoff of up to 30 s, and a resumed watch gives no sign of having caught
// up); the new ones are unsynced until their lists return, and the pods wait
// for that.
func (ts *twins) restartWatches(ctx context.Context) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.shared != nil {
		ts.shared.cancel()
		ts.shared = ts.watch(ctx, metav1.NamespaceAll)
		for _, t := range ts.byLocal {
			t.watch.Store(ts.shared)
		}
		return
	}
	for _, t := range ts.byLocal {
		t.watch.Load().cancel()
		t.watch.Store(ts.watch(ctx, t.name))
	}
}

// startShared watches the ShadowPods and pods of every namespace at once,
// for every twin to come (the cluster scope), until ctx is done.
func (ts *twins) startShared(ctx context.Context) {
	ts.shared = ts.watch(ctx, metav1.NamespaceAll)
}

// refresh brings the twins in line with the NamespaceOffloadings in store.
func (ts *twins) refresh(ctx context.Context, store cache.Store) {
	want := map[string]ferryv1alpha1.ClusterOffloadingStatus{}
	var offloadings []*ferryv1alpha1.NamespaceOffloading
	for _, obj := range store.List() {
		nso, ok := obj.(*ferryv1alpha1.NamespaceOffloading)
		if !ok {
			continue
		}
		offloadings = append(offloadings, nso)
		for _, c := range nso.Status.Clusters {
			if c.ClusterID != ts.provider || c.TwinNamespace == "" {
				continue
			}
			if c.Phase == ferryv1alpha1.OffloadingReady || c.Phase == ferryv1alpha1.OffloadingTerminating {
				want[nso.Namespace] = c
			}
		}
	}
	whyNot := map[string]string{}
	preferences := map[string]nsPreference{}
	for _, nso := range offloadings {
		if nso.DeletionTimestamp == nil {
			preferences[nso.Namespace] = nsPreference{strategy: nso.Spec.PodOffloadingStrategy, preference: nso.Spec.PlacementPreference}
		}
		if _, ok := want[nso.Namespace]; !ok {
			whyNot[nso.Namespace] = notOffloadedHere(nso, ts.provider)
		}
	}
	var changed []string
	var added []*twin
	ts.mu.Lock()
	if ts.byLocal == nil {
		ts.byLocal, ts.byTwin = map[string]*twin{}, map[string]*twin{}
	}
	// A pod waiting here is told the new reason: its namespace's
	// NamespaceOffloading changed state (e.g. the provider refused it).
	changed = appendChangedKeys(changed, ts.whyNot, whyNot)
	ts.whyNot = whyNot
	// A changed preference changes the deletion cost of the namespace's pods.
	changed = appendChangedKeys(changed, ts.preferences, preferences)
	ts.preferences = preferences
	for local, t := range ts.byLocal {
		c, ok := want[local]
		if ok && c.TwinNamespace == t.name {
			continue
		}
		if w := t.watch.Load(); w != ts.shared {
			w.cancel()
		}
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
		t := &twin{local: local, name: c.TwinNamespace}
		w := ts.shared
		if w == nil {
			w = ts.watch(ctx, c.TwinNamespace)
		}
		t.watch.Store(w)
		t.ready.Store(ready)
		ts.byLocal[local], ts.byTwin[c.TwinNamespace] = t, t
		changed = append(changed, local)
		added = append(added, t)
		klog.FromContext(ctx).Info("Following twin namespace", "namespace", local, "twinNamespace", c.TwinNamespace, "ready", ready)
	}
	shared := ts.shared
	ts.mu.Unlock()
	for _, ns := range slices.Compact(slices.Sorted(slices.Values(changed))) {
		ts.namespaceChanged(ns)
	}
	if shared == nil {
		return
	}
	// The shared watch saw the new twins' objects before they were twins,
	// and dropped their events: wake their local pods now, so that the
	// ShadowPod of a pod deleted meanwhile is removed.
	for _, t := range added {
		w := t.watch.Load()
		for _, inf := range []cache.SharedIndexInformer{w.shadows, w.pods} {
			objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, t.name)
			for _, o := range objs {
				if m, ok := o.(metav1.Object); ok {
					ts.enqueue(types.NamespacedName{Namespace: t.local, Name: m.GetName()})
				}
			}
		}
	}
}

// watch runs the ShadowPod and pod informers of namespace ("": every
// namespace), selected by this consumer's origin label, until it is
// cancelled or ctx is done.
func (ts *twins) watch(ctx context.Context, namespace string) *remoteWatch {
	ctx, cancel := context.WithCancel(ctx)
	selector := ferryv1alpha1.LabelOriginCluster + "=" + string(ts.consumer)
	w := &remoteWatch{
		cancel:  cancel,
		shadows: ts.informer(namespace, selector, &ferryv1alpha1.ShadowPod{}, &ferryv1alpha1.ShadowPodList{}),
		pods:    ts.informer(namespace, selector, &corev1.Pod{}, &corev1.PodList{}),
	}
	go w.shadows.RunWithContext(ctx)
	go w.pods.RunWithContext(ctx)
	return w
}

// informer watches one kind in namespace; every event in a twin namespace
// wakes the local pod of the same name.
func (ts *twins) informer(namespace, selector string, obj client.Object, list client.ObjectList) cache.SharedIndexInformer {
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
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = inf.SetTransform(trimRemote)
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

// trimRemote is the transform of the provider's ShadowPods and pods: it
// drops what the controller never reads, the managed fields, a ShadowPod's
// pod template (an update replaces it whole) and a real pod's spec (only its
// metadata and status are copied back), which are most of their size.
func trimRemote(obj any) (any, error) {
	switch o := obj.(type) {
	case *ferryv1alpha1.ShadowPod:
		o.Spec.Template = ferryv1alpha1.ShadowPodTemplate{}
	case *corev1.Pod:
		o.Spec = corev1.PodSpec{}
	}
	return DropManagedFields(obj)
}

func withSelector(opts metav1.ListOptions, selector string) *metav1.ListOptions {
	opts.LabelSelector = selector
	opts.FieldSelector = fields.Everything().String()
	return &opts
}

// appendChangedKeys appends to keys every key whose value differs between
// before and after, or that only one of them has.
func appendChangedKeys[V comparable](keys []string, before, after map[string]V) []string {
	for k, v := range after {
		if prev, ok := before[k]; !ok || prev != v {
			keys = append(keys, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}
