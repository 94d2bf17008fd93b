package offloading

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// NamespaceOffloadingInformer watches the local cluster's
// NamespaceOffloadings through c; changed receives a signal (coalesced,
// never blocking) whenever one is added, updated or deleted.
func NamespaceOffloadingInformer(c client.WithWatch, changed chan<- struct{}) (cache.Store, cache.Controller) {
	signal := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	return cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				l := &ferryv1alpha1.NamespaceOffloadingList{}
				return l, c.List(ctx, l, &client.ListOptions{Raw: &opts})
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return c.Watch(ctx, &ferryv1alpha1.NamespaceOffloadingList{}, &client.ListOptions{Raw: &opts})
			},
		},
		ObjectType: &ferryv1alpha1.NamespaceOffloading{},
		Handler:    cache.ResourceEventHandlerFuncs{AddFunc: signal, UpdateFunc: func(_, o any) { signal(o) }, DeleteFunc: signal},
	})
}

// DropManagedFields is an informer transform trimming what it keeps:
// managed fields are never read and are a good part of an object's size.
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// NodePodInformerFactory is an informer factory of the pods bound to node:
// the offloading and the reflection share its pod informer. Whoever uses it
// starts it; the informer stops when the first stop channel it was started
// with closes.
func NodePodInformerFactory(c kubernetes.Interface, node string) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	// Set here, before anyone can start it: a thousand pods' managed
	// fields are most of their size and are never read.
	_ = f.Core().V1().Pods().Informer().SetTransform(DropManagedFields)
	return f
}
