package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
)

// WatchingProviders are Providers that also hand out clients that watch:
// the provider claims are then watched, not polled.
type WatchingProviders interface {
	Providers
	// WatchClient is provider id's client that watches, the same one
	// until the provider's credential changes, or an error wrapping
	// ErrNotPeered.
	WatchClient(ctx context.Context, id ferryv1alpha1.ClusterID) (client.WithWatch, error)
}

// indexRemoteClaim indexes the remote volumes by the provider claim they
// stand for (remoteRef.String()).
const indexRemoteClaim = "ferry.io/remote-claim"

// remoteClaimIndex is the value of indexRemoteClaim for a volume.
func remoteClaimIndex(o client.Object) []string {
	pv, ok := o.(*corev1.PersistentVolume)
	if !ok {
		return nil
	}
	if ref, ok := remoteRefOf(pv); ok {
		return []string{ref.String()}
	}
	return nil
}

// RemoteClaimWatcher watches the claims the storage fabric made in the
// providers for this cluster, those labelled as made for it: one informer
// per provider when the provider lets the consumer list and watch claims
// cluster-wide (it bound the consumer to ferry-reflection-reader, as for the
// virtual kubelets' cluster scope), one per provider and twin namespace
// otherwise (the consumer's own credential reaches the twin namespaces one
// by one). The scope is asked again when the provider's credential changes
// and every ScopeRecheck, so a grant given or withdrawn later is followed. Every change of one wakes
// the remote volume standing for it, which then reads the claim from the
// informer instead of asking the provider: a provider claim's binding shows
// on the volume at once, with no poll. The twin namespaces come from this
// cluster's NamespaceOffloadings, looked at every Resync; an informer whose
// twin namespace is gone, or whose provider's credential changed, is
// stopped (and started again with the new one).
type RemoteClaimWatcher struct {
	// Client reads this cluster (the manager's cache, with indexRemoteClaim
	// on volumes).
	Client    client.Client
	Providers WatchingProviders
	ClusterID ferryv1alpha1.ClusterID
	// Resync is how often the twin namespaces are listed (2s when zero).
	Resync time.Duration
	// ScopeRecheck is how often a provider is asked again whether the
	// consumer may watch claims cluster-wide (5m when zero).
	ScopeRecheck time.Duration

	wake     chan event.GenericEvent
	mu       sync.Mutex
	watching map[twinKey]*claimInformer
	scopes   map[ferryv1alpha1.ClusterID]providerScope // only Start's goroutine uses it
}

// providerScope is how a provider's claims are watched, decided with
// client at decided.
type providerScope struct {
	client  client.WithWatch
	scope   remotescope.Scope
	decided time.Time
}

// claimsResource is what the consumer must list and watch cluster-wide in a
// provider for one informer to cover all its twin namespaces.
var claimsResource = []schema.GroupResource{{Resource: "persistentvolumeclaims"}}

// twinKey names one twin namespace of one provider; an empty Namespace is
// the provider's cluster-wide informer.
type twinKey struct {
	Cluster   ferryv1alpha1.ClusterID
	Namespace string
}

// claimInformer is one twin namespace's informer.
type claimInformer struct {
	client client.WithWatch
	store  cache.Store
	synced cache.InformerSynced
	stop   context.CancelFunc
}

// NewRemoteClaimWatcher returns a watcher; Wake is the source of its
// events for the remote volume controller.
func NewRemoteClaimWatcher(c client.Client, providers WatchingProviders, clusterID ferryv1alpha1.ClusterID) *RemoteClaimWatcher {
	return &RemoteClaimWatcher{Client: c, Providers: providers, ClusterID: clusterID,
		wake: make(chan event.GenericEvent, 1024), watching: map[twinKey]*claimInformer{},
		scopes: map[ferryv1alpha1.ClusterID]providerScope{}}
}

// Wake carries a remote volume (by name) whose provider claim changed.
func (w *RemoteClaimWatcher) Wake() <-chan event.GenericEvent { return w.wake }

// NeedLeaderElection implements manager.LeaderElectionRunnable: the remote
// volume controller it wakes runs on the leader.
func (w *RemoteClaimWatcher) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it keeps an informer per twin
// namespace until ctx ends.
func (w *RemoteClaimWatcher) Start(ctx context.Context) error {
	resync := w.Resync
	if resync == 0 {
		resync = 2 * time.Second
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	defer w.stopAll()
	for {
		if err := w.sync(ctx); err != nil {
			log.FromContext(ctx).Error(err, "watch provider claims")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sync starts the informers of new twin namespaces and stops those of
// twin namespaces gone or whose provider's client changed.
func (w *RemoteClaimWatcher) sync(ctx context.Context) error {
	var nsos ferryv1alpha1.NamespaceOffloadingList
	if err := w.Client.List(ctx, &nsos); err != nil {
		return fmt.Errorf("list NamespaceOffloadings: %w", err)
	}
	want := map[twinKey]bool{}
	for _, nso := range nsos.Items {
		for _, c := range nso.Status.Clusters {
			if c.TwinNamespace != "" {
				want[twinKey{Cluster: c.ClusterID, Namespace: c.TwinNamespace}] = true
			}
		}
	}
	clients := map[ferryv1alpha1.ClusterID]client.WithWatch{}
	for key := range want {
		if _, ok := clients[key.Cluster]; ok {
			continue
		}
		c, err := w.Providers.WatchClient(ctx, key.Cluster)
		if err != nil {
			// Not peered, or its credential unreadable: the volumes
			// of that provider poll it meanwhile.
			clients[key.Cluster] = nil
			continue
		}
		clients[key.Cluster] = c
	}
	informers := map[twinKey]bool{}
	for key := range want {
		if c := clients[key.Cluster]; c != nil && w.scopeOf(ctx, key.Cluster, c) == remotescope.Cluster {
			informers[twinKey{Cluster: key.Cluster}] = true
		} else {
			informers[key] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, inf := range w.watching {
		if !informers[key] || clients[key.Cluster] != inf.client {
			inf.stop()
			delete(w.watching, key)
		}
	}
	for key := range informers {
		if c := clients[key.Cluster]; c != nil && w.watching[key] == nil {
			w.watching[key] = w.startInformer(ctx, key, c)
		}
	}
	return nil
}

// scopeOf is how provider id's claims are watched: asked of the provider
// with c when c is new or the last answer is older than ScopeRecheck.
// When the provider cannot be asked, per twin namespace (what the
// consumer's own credential allows).
func (w *RemoteClaimWatcher) scopeOf(ctx context.Context, id ferryv1alpha1.ClusterID, c client.WithWatch) remotescope.Scope {
	recheck := w.ScopeRecheck
	if recheck == 0 {
		recheck = 5 * time.Minute
	}
	if s, ok := w.scopes[id]; ok && s.client == c && time.Since(s.decided) < recheck {
		return s.scope
	}
	scope, err := remotescope.ResolveWith(ctx, func(ctx context.Context, r *authorizationv1.SelfSubjectAccessReview) (*authorizationv1.SelfSubjectAccessReview, error) {
		err := c.Create(ctx, r)
		return r, err
	}, remotescope.Auto, claimsResource)
	if err != nil {
		log.FromContext(ctx).Error(err, "watch provider claims per twin namespace", "cluster", id)
		scope = remotescope.Namespace
	}
	if old, ok := w.scopes[id]; !ok || old.scope != scope {
		log.FromContext(ctx).Info("watching provider claims", "cluster", id, "scope", scope)
	}
	w.scopes[id] = providerScope{client: c, scope: scope, decided: time.Now()}
	return scope
}

// startInformer watches the claims made for this cluster in one twin
// namespace (every namespace when key.Namespace is empty), waking their
// volumes on every change.
func (w *RemoteClaimWatcher) startInformer(ctx context.Context, key twinKey, c client.WithWatch) *claimInformer {
	ctx, stop := context.WithCancel(ctx)
	selector := labels.SelectorFromSet(labels.Set{
		ferryv1alpha1.LabelManagedBy: ferryv1alpha1.ManagedByStorage, ferryv1alpha1.LabelOriginCluster: string(w.ClusterID),
	})
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			var list corev1.PersistentVolumeClaimList
			err := c.List(ctx, &list, &client.ListOptions{Namespace: key.Namespace, LabelSelector: selector, Raw: &o})
			return &list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &corev1.PersistentVolumeClaimList{}, &client.ListOptions{Namespace: key.Namespace, LabelSelector: selector, Raw: &o})
		},
	}
	changed := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
			w.wakeVolumes(ctx, remoteRef{Cluster: key.Cluster, Namespace: pvc.Namespace, Name: pvc.Name})
		}
	}
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.PersistentVolumeClaim{},
		// Managed fields are never read: not kept.
		Transform: func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
			}
			return obj, nil
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    changed,
			UpdateFunc: func(_, o any) { changed(o) },
			DeleteFunc: func(o any) {
				if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = d.Obj
				}
				changed(o)
			},
		},
	})
	go informer.RunWithContext(ctx)
	log.FromContext(ctx).V(1).Info("watching provider claims", "cluster", key.Cluster, "namespace", key.Namespace)
	return &claimInformer{client: c, store: store, synced: informer.HasSynced, stop: stop}
}

// wakeVolumes wakes the remote volumes standing for ref.
func (w *RemoteClaimWatcher) wakeVolumes(ctx context.Context, ref remoteRef) {
	var pvs corev1.PersistentVolumeList
	if err := w.Client.List(ctx, &pvs, client.MatchingFields{indexRemoteClaim: ref.String()}); err != nil {
		log.FromContext(ctx).Error(err, "find the volume of a provider claim", "claim", ref.String())
		return
	}
	for i := range pvs.Items {
		pv := &corev1.PersistentVolume{}
		pv.Name = pvs.Items[i].Name
		select {
		case w.wake <- event.GenericEvent{Object: pv}:
		case <-ctx.Done():
			return
		}
	}
}

// Get reads a provider claim from its twin namespace's informer; ok is
// false when that informer is not running or not synced yet, or does not
// hold the claim (it may be too new for it): the caller asks the provider.
func (w *RemoteClaimWatcher) Get(ref remoteRef) (*corev1.PersistentVolumeClaim, bool) {
	if w == nil {
		return nil, false
	}
	inf := w.informerOf(ref)
	if inf == nil || !inf.synced() {
		return nil, false
	}
	obj, exists, err := inf.store.GetByKey(types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}.String())
	if err != nil || !exists {
		return nil, false
	}
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	return pvc, ok
}

// Watching says whether ref's twin namespace has a synced informer: its
// claims' changes wake their volumes, which need no poll.
func (w *RemoteClaimWatcher) Watching(ref remoteRef) bool {
	if w == nil {
		return false
	}
	inf := w.informerOf(ref)
	return inf != nil && inf.synced()
}

// informerOf is the informer holding ref's twin namespace: its own, or its
// provider's cluster-wide one.
func (w *RemoteClaimWatcher) informerOf(ref remoteRef) *claimInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf := w.watching[twinKey{Cluster: ref.Cluster, Namespace: ref.Namespace}]; inf != nil {
		return inf
	}
	return w.watching[twinKey{Cluster: ref.Cluster}]
}

func (w *RemoteClaimWatcher) stopAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, inf := range w.watching {
		inf.stop()
		delete(w.watching, key)
	}
}
