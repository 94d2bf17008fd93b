package clusterselector

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// namespaceOffloadings is the resource the plugin watches.
var namespaceOffloadings = schema.GroupVersionResource{Group: ferryv1alpha1.GroupVersion.Group, Version: ferryv1alpha1.GroupVersion.Version, Resource: "namespaceoffloadings"}

// Policy is a namespace's offloading policy, compiled once per change of
// its NamespaceOffloading.
type Policy struct {
	Strategy ferryv1alpha1.PodOffloadingStrategy
	// Selector picks the providers; nil when SelectorErr is set.
	Selector    *placement.ClusterSelector
	SelectorErr error
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
		AddFunc:    func(obj any) { p.set(ctx, obj) },
		UpdateFunc: func(_, obj any) { p.set(ctx, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				p.mu.Lock()
				delete(p.byNS, u.GetNamespace())
				p.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch NamespaceOffloadings: %w", err)
	}
	go p.informer.RunWithContext(ctx)
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

func (p *Policies) set(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	var nso ferryv1alpha1.NamespaceOffloading
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &nso); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot read NamespaceOffloading; its namespace is placed as not offloaded", "namespace", u.GetNamespace())
		p.mu.Lock()
		delete(p.byNS, u.GetNamespace())
		p.mu.Unlock()
		return
	}
	policy := Compile(&nso)
	p.mu.Lock()
	defer p.mu.Unlock()
	if policy == nil {
		delete(p.byNS, nso.Namespace)
		return
	}
	p.byNS[nso.Namespace] = policy
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
	return &Policy{Strategy: strategy, Selector: sel, SelectorErr: err}
}
