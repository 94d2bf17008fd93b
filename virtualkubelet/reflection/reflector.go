package reflection

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons of the events the reflection records on local objects.
const (
	// ReasonReflectionFailed: the provider refused the copy.
	ReasonReflectionFailed = "ReflectionFailed"
	// ReasonNameTaken: the twin namespace holds an object of that name
	// ferry did not make; it is left alone.
	ReasonNameTaken = "ReflectionNameTaken"
)

// notSyncedRetry is how soon an object is looked at again while the watch
// of its twin namespace is still listing.
const notSyncedRetry = 200 * time.Millisecond

// reflector keeps one kind's local objects equal on the provider.
type reflector struct {
	kind     Kind
	t        translator
	policy   Policy
	workers  int
	env      *Env
	local    cache.SharedIndexInformer
	remote   *remoteSet
	ns       *namespaces
	writer   client.Client
	recorder record.EventRecorder
	metrics  *metrics
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	// recreateOnInvalid deletes and recreates a copy the provider refuses
	// to update (an immutable field changed: the local object was
	// recreated); off for kinds holding data (PVCs).
	recreateOnInvalid bool
	// ignoreRemote tells remote objects of this kind that another reflector
	// owns (the service-account token Secrets).
	ignoreRemote func(client.Object) bool
	// afterSync, when set, runs after each successful sync of a key, with
	// the local object (nil when gone) and whether the policy reflects it
	// (its translator may still skip the copy: the default service account
	// has no copy, its token Secret is kept all the same).
	afterSync func(ctx context.Context, key types.NamespacedName, local client.Object, twin string, reflected bool) (time.Duration, error)

	mu       sync.Mutex
	queuedAt map[types.NamespacedName]time.Time
	// written is what this reflector last wrote, until its informer sees it.
	written *writeLog
	items   map[types.NamespacedName]struct{}
}

func (r *reflector) enqueue(key types.NamespacedName) {
	r.mu.Lock()
	if _, ok := r.queuedAt[key]; !ok {
		r.queuedAt[key] = time.Now()
	}
	r.mu.Unlock()
	r.queue.Add(key)
}

func (r *reflector) enqueueAfter(key types.NamespacedName, d time.Duration) {
	r.queue.AddAfter(key, d)
}

// onLocal queues a local object's change when its namespace is offloaded.
func (r *reflector) onLocal(obj any) {
	key, ok := keyOf(obj)
	if ok && r.ns.twin(key.Namespace) != "" {
		r.enqueue(key)
	}
}

// onRemote queues the local object a provider copy stands for.
// A deletion comes as a tombstone (see remoteSet).
func (r *reflector) onRemote(obj any) {
	d, deleted := obj.(cache.DeletedFinalStateUnknown)
	if deleted {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || (r.ignoreRemote != nil && r.ignoreRemote(o)) {
		return
	}
	if deleted {
		r.written.seenDeleted(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, o)
	}
	if local := r.ns.local(o.GetNamespace()); local != "" {
		r.enqueue(types.NamespacedName{Namespace: local, Name: o.GetName()})
	}
}

// enqueueNamespace queues every local object of namespace.
func (r *reflector) enqueueNamespace(namespace string) {
	objs, err := r.local.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return
	}
	for _, o := range objs {
		if key, ok := keyOf(o); ok {
			r.enqueue(key)
		}
	}
}

func keyOf(obj any) (types.NamespacedName, bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return types.NamespacedName{}, false
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	return types.NamespacedName{Namespace: ns, Name: name}, err == nil
}

func (r *reflector) run(ctx context.Context) {
	runWorkers(ctx, r.workers, r.queue.ShutDown, r.processNext)
}

// runWorkers runs n workers calling next until it reports the queue shut
// down; when ctx ends it shuts the queue down and waits for them.
func runWorkers(ctx context.Context, n int, shutDown func(), next func(context.Context) bool) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for next(ctx) {
			}
		})
	}
	<-ctx.Done()
	shutDown()
	wg.Wait()
}

func (r *reflector) processNext(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	r.metrics.depth.WithLabelValues(string(r.kind)).Set(float64(r.queue.Len()))
	r.mu.Lock()
	queued, ok := r.queuedAt[key]
	delete(r.queuedAt, key)
	r.mu.Unlock()
	retry, err := r.sync(ctx, key)
	if ok {
		r.metrics.duration.WithLabelValues(string(r.kind)).Observe(time.Since(queued).Seconds())
	}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return true
		}
		r.metrics.errors.WithLabelValues(string(r.kind)).Inc()
		klog.FromContext(ctx).V(1).Info("Reflection failed; will retry", "kind", r.kind, "object", key, "err", err.Error())
		r.queue.AddRateLimited(key)
	case retry > 0:
		r.queue.Forget(key)
		r.enqueueAfter(key, retry)
	default:
		r.queue.Forget(key)
	}
	return true
}

// reflects tells whether the policy lets local be reflected.
func (r *reflector) reflects(local metav1.Object) bool {
	a := local.GetAnnotations()
	if a[ferryv1alpha1.AnnotationSkipReflection] == "true" {
		return false
	}
	return r.policy != AllowList || a[ferryv1alpha1.AnnotationAllowReflection] == "true"
}

// sync brings the provider's copy of one local object in line. It returns a
// delay after which to look again when it waits for something no watch
// reports.
func (r *reflector) sync(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	twin := r.ns.twin(key.Namespace)
	if twin == "" {
		// Not (or no longer) offloaded: the twin namespace takes its
		// copies with it when it goes.
		r.dropItem(key)
		return 0, nil
	}
	if !r.remote.synced(r.kind, twin) {
		return notSyncedRetry, nil
	}
	var local client.Object
	if obj, ok, err := r.local.GetIndexer().GetByKey(key.String()); err != nil {
		return 0, err
	} else if ok {
		local = obj.(client.Object)
	}
	remoteKey := types.NamespacedName{Namespace: twin, Name: key.Name}
	remote := r.current(remoteKey)

	var want client.Object
	allowed := local != nil && local.GetDeletionTimestamp() == nil && r.reflects(local)
	if allowed {
		w, skip, err := r.t.desired(r.env, local, twin)
		if err != nil {
			return 0, err
		}
		if skip == "" {
			want = w
		} else {
			klog.FromContext(ctx).V(4).Info("Not reflected", "kind", r.kind, "object", key, "reason", skip)
		}
	}
	var err error
	switch {
	case want == nil && remote != nil:
		err = r.delete(ctx, remoteKey, remote)
	case want == nil:
	case remote == nil:
		err = r.create(ctx, local, remoteKey, want)
	case !r.t.equal(want, remote):
		if rc, ok := r.t.(recreator); ok && rc.mustRecreate(want, remote) {
			klog.FromContext(ctx).V(1).Info("Recreating the copy: an update cannot change it", "kind", r.kind, "object", key)
			if err := r.delete(ctx, remoteKey, remote); err != nil {
				return 0, err
			}
			return notSyncedRetry, nil
		}
		err = r.update(ctx, local, remoteKey, want, remote)
	}
	if err != nil {
		return 0, err
	}
	if want != nil {
		r.setItem(key)
	} else {
		r.dropItem(key)
	}
	if r.afterSync != nil {
		return r.afterSync(ctx, key, local, twin, allowed)
	}
	return 0, nil
}

// current is the provider's copy as last seen by the informer, or as last
// written by this reflector when that is newer.
func (r *reflector) current(key types.NamespacedName) client.Object {
	cached := r.remote.get(r.kind, key.Namespace, key.Name)
	if cached != nil && r.ignoreRemote != nil && r.ignoreRemote(cached) {
		cached = nil
	}
	return r.written.current(key, cached)
}

func (r *reflector) create(ctx context.Context, local client.Object, key types.NamespacedName, want client.Object) error {
	err := r.writer.Create(ctx, want)
	r.metrics.writes.WithLabelValues(string(r.kind), "create").Inc()
	switch {
	case err == nil:
		r.written.remember(key, want, false)
		klog.FromContext(ctx).V(2).Info("Reflected", "kind", r.kind, "object", klog.KObj(local), "twinNamespace", key.Namespace)
		return nil
	case apierrors.IsAlreadyExists(err):
		// Not in the (origin-selected) cache: someone else's object.
		r.recorder.Eventf(local, corev1.EventTypeWarning, ReasonNameTaken,
			"%s %s/%s exists on the provider and was not made by ferry; it is left alone", r.kind, key.Namespace, key.Name)
		return nil
	}
	r.refused(local, "create", err)
	return fmt.Errorf("create %s %s: %w", r.kind, key, err)
}

func (r *reflector) update(ctx context.Context, local client.Object, key types.NamespacedName, want, remote client.Object) error {
	merged := r.t.merge(want, remote)
	err := r.writer.Update(ctx, merged)
	r.metrics.writes.WithLabelValues(string(r.kind), "update").Inc()
	switch {
	case err == nil:
		r.written.remember(key, merged, false)
		klog.FromContext(ctx).V(2).Info("Updated reflected object", "kind", r.kind, "object", klog.KObj(local), "twinNamespace", key.Namespace)
		return nil
	case apierrors.IsNotFound(err):
		r.written.remember(key, remote, true)
		return fmt.Errorf("update %s %s: gone meanwhile: %w", r.kind, key, err)
	case apierrors.IsConflict(err):
		return fmt.Errorf("update %s %s: %w", r.kind, key, err) // retried with the newer copy
	case apierrors.IsInvalid(err) && r.recreateOnInvalid:
		klog.FromContext(ctx).Info("Provider refused the update of an immutable field; recreating the copy", "kind", r.kind, "object", klog.KObj(local), "err", err.Error())
		if err := r.delete(ctx, key, remote); err != nil {
			return err
		}
		return fmt.Errorf("recreate %s %s: deleted, created once the deletion is seen", r.kind, key)
	}
	r.refused(local, "update", err)
	return fmt.Errorf("update %s %s: %w", r.kind, key, err)
}

func (r *reflector) delete(ctx context.Context, key types.NamespacedName, remote client.Object) error {
	uid := remote.GetUID()
	err := r.writer.Delete(ctx, remote, client.Preconditions{UID: &uid})
	r.metrics.writes.WithLabelValues(string(r.kind), "delete").Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s %s: %w", r.kind, key, err)
	}
	r.written.remember(key, remote, true)
	klog.FromContext(ctx).V(2).Info("Removed reflected object", "kind", r.kind, "twinNamespace", key.Namespace, "name", key.Name)
	return nil
}

// refused records why the provider refused a write, on the local object.
func (r *reflector) refused(local client.Object, verb string, err error) {
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) {
		r.recorder.Eventf(local, corev1.EventTypeWarning, ReasonReflectionFailed, "provider refused to %s the copy: %v", verb, err)
	}
}

func (r *reflector) setItem(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.items[key] = struct{}{}
	// Set under the lock: workers setting it out of order would leave a
	// stale count.
	r.metrics.items.WithLabelValues(string(r.kind)).Set(float64(len(r.items)))
}

func (r *reflector) dropItem(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.items, key)
	r.metrics.items.WithLabelValues(string(r.kind)).Set(float64(len(r.items)))
}
