package clusterselector

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// namespaceOffloadings is the resource the plugin watches.
var namespaceOffloadings = schema.GroupVersionResource{Group: ferryv1alpha1.GroupVersion.Group, Version: ferryv1alpha1.GroupVersion.Version, Resource: "namespaceoffloadings"}

// Policy is a namespace's offloading policy, compiled once per change of
// its NamespaceOffloading.
type Policy struct {
	Strategy ferryv1alpha1.PodOffloadingStrategy
	// Preference is the namespace's placement preference (None unless
	// the strategy is LocalAndRemote: placement.Preference).
	Preference ferryv1alpha1.PlacementPreference
	// Selector picks the providers; nil when SelectorErr is set.
	Selector    *placement.ClusterSelector
	SelectorErr error

	resourceVersion uint64
}

// Policies holds the policy of every offloaded namespace.
type Policies struct {
	mu       sync.RWMutex
	byNS     map[string]*Policy
	informer cache.SharedIndexInformer
}

// NewPolicies watches the NamespaceOffloadings of the cluster cfg reaches
// (only objects named "offloading", the one name a NamespaceOffloading may
// have) until ctx ends. When ferry's CRDs are not installed yet, the watch
// retries until they are; HasSynced says when the view is complete.
func NewPolicies(ctx context.Context, client dynamic.Interface) (*Policies, error) {
	p := &Policies{byNS: map[string]*Policy{}}
	p.informer = dynamicinformer.NewFilteredDynamicInformer(client, namespaceOffloadings, metav1.NamespaceAll, 0, cache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ferryv1alpha1.NamespaceOffloadingName).String()
		}).Informer()
	if _, err := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.apply(obj) },
		UpdateFunc: func(_, obj any) { p.apply(obj) },
		DeleteFunc: func(obj any) { p.remove(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watch NamespaceOffloadings: %w", err)
	}
	go p.informer.RunWithContext(ctx)
	return p, nil
}

var (
	sharedMu sync.Mutex
	shared   = map[any]*Policies{}
)

// SharedPolicies is NewPolicies once per owner: ferry's plugins of one
// scheduler (owner: its informer factory, which all its profiles share)
// read NamespaceOffloadings from one watch. The first caller's ctx bounds
// the watch's life.
func SharedPolicies(ctx context.Context, owner any, newClient func() (dynamic.Interface, error)) (*Policies, error) {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if p, ok := shared[owner]; ok {
		return p, nil
	}
	client, err := newClient()
	if err != nil {
		return nil, err
	}
	p, err := NewPolicies(ctx, client)
	if err != nil {
		return nil, err
	}
	shared[owner] = p
	context.AfterFunc(ctx, func() {
		sharedMu.Lock()
		defer sharedMu.Unlock()
		if shared[owner] == p {
			delete(shared, owner)
		}
	})
	return p, nil
}

// NewStaticPolicies returns policies compiled from nsos: for tests.
func NewStaticPolicies(nsos ...*ferryv1alpha1.NamespaceOffloading) *Policies {
	p := &Policies{byNS: map[string]*Policy{}}
	for _, nso := range nsos {
		p.byNS[nso.Namespace] = Compile(nso)
	}
	return p
}

// HasSynced says whether every NamespaceOffloading has been seen once.
func (p *Policies) HasSynced() bool { return p.informer == nil || p.informer.HasSynced() }

// Get returns the policy of namespace, nil when it is not offloaded.
func (p *Policies) Get(namespace string) *Policy {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.byNS[namespace]
}

// apply records the policy of a NamespaceOffloading (an *Unstructured
// from a dynamic informer) and returns its namespace. It is fed by two
// watches (the plugin's, and the scheduler's through the queueing hint), so
// an object older than the one recorded is ignored.
func (p *Policies) apply(obj any) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	ns, rv := u.GetNamespace(), resourceVersion(u)
	var nso ferryv1alpha1.NamespaceOffloading
	var policy *Policy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nso); err != nil {
		// The API server validated it: this is a schema skew. Refuse
		// rather than place by a policy not understood.
		policy = &Policy{SelectorErr: fmt.Errorf("cannot read NamespaceOffloading: %w", err)}
	} else {
		policy = Compile(&nso)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.byNS[ns]; ok && rv != 0 && old.resourceVersion > rv {
		return ns
	}
	if policy == nil {
		delete(p.byNS, ns)
		return ns
	}
	policy.resourceVersion = rv
	p.byNS[ns] = policy
	return ns
}

// remove forgets the policy of a deleted NamespaceOffloading and returns
// its namespace.
func (p *Policies) remove(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.byNS[u.GetNamespace()]; ok && old.resourceVersion > resourceVersion(u) {
		return u.GetNamespace() // recreated since
	}
	delete(p.byNS, u.GetNamespace())
	return u.GetNamespace()
}

// resourceVersion orders versions of one object. Kubernetes makes
// resourceVersions opaque; this API server's are etcd revisions, and 0
// (unparsable) disables the ordering.
func resourceVersion(u *unstructured.Unstructured) uint64 {
	rv, err := strconv.ParseUint(u.GetResourceVersion(), 10, 64)
	if err != nil {
		return 0
	}
	return rv
}

// Compile turns a NamespaceOffloading into the policy its namespace's pods
// are placed by; nil for one being deleted (its pods stay local, as the pod
// webhook places them).
func Compile(nso *ferryv1alpha1.NamespaceOffloading) *Policy {
	if nso.DeletionTimestamp != nil {
		return nil
	}
	strategy := nso.Spec.PodOffloadingStrategy
	if strategy == "" {
		strategy = ferryv1alpha1.PodOffloadingLocalAndRemote
	}
	sel, err := placement.NewClusterSelector(nso.Spec.ClusterSelector)
	return &Policy{Strategy: strategy, Preference: placement.Preference(strategy, nso.Spec.PlacementPreference), Selector: sel, SelectorErr: err}
}
