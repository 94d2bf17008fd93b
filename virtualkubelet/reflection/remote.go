package reflection

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/virtualkubelet/offloading"
)

// remoteKind is how one kind is watched on the provider.
type remoteKind struct {
	resource schema.GroupResource
	informer func(informers.SharedInformerFactory) cache.SharedIndexInformer
	// unlabelled kinds (events) cannot be selected by ferry's origin label.
	unlabelled bool
}

// remoteWatched is how each kind's copies are watched on the provider.
var remoteWatched = map[Kind]remoteKind{
	ConfigMaps: {resource: corev1.Resource("configmaps"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().ConfigMaps().Informer()
	}},
	Secrets: {resource: corev1.Resource("secrets"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Secrets().Informer()
	}},
	ServiceAccounts: {resource: corev1.Resource("serviceaccounts"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().ServiceAccounts().Informer()
	}},
	Services: {resource: corev1.Resource("services"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Services().Informer()
	}},
	EndpointSlices: {resource: discoveryv1.Resource("endpointslices"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Discovery().V1().EndpointSlices().Informer()
	}},
	Ingresses: {resource: networkingv1.Resource("ingresses"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().Ingresses().Informer()
	}},
	NetworkPolicies: {resource: networkingv1.Resource("networkpolicies"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Networking().V1().NetworkPolicies().Informer()
	}},
	PersistentVolumeClaims: {resource: corev1.Resource("persistentvolumeclaims"), informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().PersistentVolumeClaims().Informer()
	}},
	Events: {resource: corev1.Resource("events"), unlabelled: true, informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Events().Informer()
	}},
}

// remoteKinds are the kinds watched on the provider with workers: every
// enabled kind, and Secrets also when ServiceAccounts are reflected (their
// token Secrets).
func remoteKinds(workers map[Kind]int) []Kind {
	var kinds []Kind
	for _, k := range AllKinds {
		if workers[k] > 0 || (k == Secrets && workers[ServiceAccounts] > 0) {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// RemoteResources are the provider's resources the reflection tuned by o
// watches: those a cluster-wide watch needs the consumer to list and watch
// everywhere.
func RemoteResources(o Options) []schema.GroupResource {
	kinds := remoteKinds(o.WithDefaults().Workers)
	out := make([]schema.GroupResource, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, remoteWatched[k].resource)
	}
	return out
}

// remoteSet watches the provider's copies: cluster-wide when cluster is
// set, otherwise one set of informers per twin namespace.
type remoteSet struct {
	client   kubernetes.Interface
	selector string
	cluster  bool
	kinds    map[Kind]remoteKind
	// onEvent is called with every add, update and delete the informers
	// see; a delete always brings a cache.DeletedFinalStateUnknown.
	onEvent func(kind Kind, obj any)

	mu    sync.RWMutex
	units map[string]*remoteUnit // by twin namespace, or "" when cluster-wide
}

type remoteUnit struct {
	informers map[Kind]cache.SharedIndexInformer
	cancel    context.CancelFunc
	factories []informers.SharedInformerFactory
}

// start begins watching namespace ("" for every namespace).
func (s *remoteSet) start(ctx context.Context, namespace string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.units == nil {
		s.units = map[string]*remoteUnit{}
	}
	if _, ok := s.units[namespace]; ok {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	labelled := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s.selector }))
	unlabelled := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(namespace))
	u := &remoteUnit{informers: map[Kind]cache.SharedIndexInformer{}, cancel: cancel, factories: []informers.SharedInformerFactory{labelled, unlabelled}}
	for kind, rk := range s.kinds {
		f := labelled
		if rk.unlabelled {
			f = unlabelled
		}
		inf := rk.informer(f)
		if err := inf.SetTransform(offloading.DropManagedFields); err != nil {
			cancel()
			return fmt.Errorf("watch %s on the provider: %w", rk.resource, err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.onEvent(kind, o) },
			UpdateFunc: func(_, o any) { s.onEvent(kind, o) },
			DeleteFunc: func(o any) {
				// Always as a tombstone, so that handlers tell a deletion.
				if _, ok := o.(cache.DeletedFinalStateUnknown); !ok {
					key, _ := cache.MetaNamespaceKeyFunc(o)
					o = cache.DeletedFinalStateUnknown{Key: key, Obj: o}
				}
				s.onEvent(kind, o)
			},
		}); err != nil {
			cancel()
			return fmt.Errorf("watch %s on the provider: %w", rk.resource, err)
		}
		u.informers[kind] = inf
	}
	labelled.Start(ctx.Done())
	unlabelled.Start(ctx.Done())
	s.units[namespace] = u
	return nil
}

// stop ends the watches of namespace.
func (s *remoteSet) stop(namespace string) {
	s.mu.Lock()
	u := s.units[namespace]
	delete(s.units, namespace)
	s.mu.Unlock()
	if u != nil {
		u.cancel()
		for _, f := range u.factories {
			f.Shutdown()
		}
	}
}

// stopAll ends every watch.
func (s *remoteSet) stopAll() {
	s.mu.RLock()
	names := make([]string, 0, len(s.units))
	for n := range s.units {
		names = append(names, n)
	}
	s.mu.RUnlock()
	for _, n := range names {
		s.stop(n)
	}
}

func (s *remoteSet) informer(kind Kind, twin string) cache.SharedIndexInformer {
	unit := twin
	if s.cluster {
		unit = ""
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if u := s.units[unit]; u != nil {
		return u.informers[kind]
	}
	return nil
}

// get is the provider's object of kind named name in twin, or nil.
func (s *remoteSet) get(kind Kind, twin, name string) client.Object {
	inf := s.informer(kind, twin)
	if inf == nil {
		return nil
	}
	obj, ok, _ := inf.GetIndexer().GetByKey(twin + "/" + name)
	if !ok {
		return nil
	}
	return obj.(client.Object)
}

// synced tells whether kind's watch covering twin has listed.
func (s *remoteSet) synced(kind Kind, twin string) bool {
	inf := s.informer(kind, twin)
	return inf != nil && inf.HasSynced()
}

// list is every cached object of kind in twin.
func (s *remoteSet) list(kind Kind, twin string) []client.Object {
	inf := s.informer(kind, twin)
	if inf == nil {
		return nil
	}
	objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, twin)
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(client.Object))
	}
	return out
}
