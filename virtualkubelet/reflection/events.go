package reflection

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// involvedKinds maps the kinds of the provider objects whose events come
// back to the local kind they stand for: a ShadowPod's events (the
// provider refusing it) are about the local pod.
var involvedKinds = map[string]Kind{
	"ConfigMap": ConfigMaps, "Secret": Secrets, "Service": Services, "EndpointSlice": EndpointSlices,
	"Ingress": Ingresses, "ServiceAccount": ServiceAccounts, "PersistentVolumeClaim": PersistentVolumeClaims,
}

// reasonScheduled is the scheduler's reason for a pod's placement.
const reasonScheduled = "Scheduled"

// eventReflector brings the provider's Events about offloaded pods (and
// their ShadowPods) and reflected objects back to the consumer, about the
// local objects, so `kubectl describe` shows what happens remotely.
type eventReflector struct {
	workers    int
	provider   ferryv1alpha1.ClusterID
	env        *Env
	local      kubernetes.Interface
	ns         *namespaces
	remote     *remoteSet
	metrics    *metrics
	reflectors map[Kind]*reflector
	pods       cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu sync.Mutex
	// mirrored is the local copy last written for each remote event.
	mirrored map[types.NamespacedName]*corev1.Event
}

func newEventReflector(workers int, provider ferryv1alpha1.ClusterID, env *Env, local kubernetes.Interface, ns *namespaces,
	rs *remoteSet, m *metrics, reflectors map[Kind]*reflector, pods cache.SharedIndexInformer) *eventReflector {
	return &eventReflector{
		workers: workers, provider: provider, env: env, local: local, ns: ns, remote: rs, metrics: m,
		reflectors: reflectors, pods: pods, mirrored: map[types.NamespacedName]*corev1.Event{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "reflection-events"}),
	}
}

func (e *eventReflector) onRemote(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if ev, ok := obj.(*corev1.Event); ok && e.ns.local(ev.Namespace) != "" {
		e.queue.Add(types.NamespacedName{Namespace: ev.Namespace, Name: ev.Name})
	}
}

func (e *eventReflector) run(ctx context.Context) {
	runWorkers(ctx, e.workers, e.queue.ShutDown, e.processNext)
}

func (e *eventReflector) processNext(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	e.metrics.depth.WithLabelValues(string(Events)).Set(float64(e.queue.Len()))
	if err := e.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			e.metrics.errors.WithLabelValues(string(Events)).Inc()
			klog.FromContext(ctx).V(1).Info("Event reflection failed; will retry", "event", key, "err", err.Error())
			e.queue.AddRateLimited(key)
		}
		return true
	}
	e.queue.Forget(key)
	return true
}

func (e *eventReflector) sync(ctx context.Context, key types.NamespacedName) error {
	obj := e.remote.get(Events, key.Namespace, key.Name)
	localNS := e.ns.local(key.Namespace)
	if obj == nil || localNS == "" {
		e.mu.Lock()
		delete(e.mirrored, key)
		e.mu.Unlock()
		return nil
	}
	want := e.translate(obj.(*corev1.Event), localNS)
	if want == nil {
		return nil
	}
	e.mu.Lock()
	have := e.mirrored[key]
	e.mu.Unlock()
	events := e.local.CoreV1().Events(localNS)
	if have == nil {
		created, err := events.Create(ctx, want, metav1.CreateOptions{})
		e.metrics.writes.WithLabelValues(string(Events), "create").Inc()
		switch {
		case err == nil:
			e.remember(key, created)
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create event %s/%s: %w", localNS, want.Name, err)
		}
		// Written before a restart: compare with it.
		if have, err = events.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("read event %s/%s: %w", localNS, want.Name, err)
		}
	}
	if eventEqual(want, have) {
		e.remember(key, have)
		return nil
	}
	want.ResourceVersion = have.ResourceVersion
	updated, err := events.Update(ctx, want, metav1.UpdateOptions{})
	e.metrics.writes.WithLabelValues(string(Events), "update").Inc()
	if err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			e.remember(key, nil)
		}
		return fmt.Errorf("update event %s/%s: %w", localNS, want.Name, err)
	}
	e.remember(key, updated)
	return nil
}

func (e *eventReflector) remember(key types.NamespacedName, ev *corev1.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev == nil {
		delete(e.mirrored, key)
		return
	}
	e.mirrored[key] = ev
}

// translate is the local copy of the remote event ev, about the local object
// it concerns, or nil when it concerns nothing ferry put there.
func (e *eventReflector) translate(ev *corev1.Event, localNS string) *corev1.Event {
	involved := ev.InvolvedObject
	var uid types.UID
	switch involved.Kind {
	case "Pod", "ShadowPod":
		if ev.Reason == reasonScheduled {
			// The provider scheduler's placement on a provider node: the
			// local pod has its own, and one write per offloaded pod buys
			// nothing.
			return nil
		}
		obj, ok, _ := e.pods.GetIndexer().GetByKey(localNS + "/" + involved.Name)
		if !ok {
			return nil
		}
		pod := obj.(*corev1.Pod)
		uid, involved = pod.UID, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", FieldPath: involved.FieldPath}
	default:
		kind, ok := involvedKinds[involved.Kind]
		r := e.reflectors[kind]
		if !ok || r == nil {
			return nil
		}
		obj, found, _ := r.local.GetIndexer().GetByKey(localNS + "/" + involved.Name)
		if !found {
			return nil
		}
		uid = obj.(metav1.Object).GetUID()
		involved = corev1.ObjectReference{Kind: involved.Kind, APIVersion: involved.APIVersion, FieldPath: involved.FieldPath}
	}
	involved.Namespace, involved.Name, involved.UID = localNS, ev.InvolvedObject.Name, uid
	out := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: ev.Name, Namespace: localNS,
			Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: string(e.provider)},
		},
		InvolvedObject:      involved,
		Reason:              ev.Reason,
		Message:             ev.Message,
		Source:              corev1.EventSource{Component: ev.Source.Component, Host: e.env.NodeName},
		FirstTimestamp:      ev.FirstTimestamp,
		LastTimestamp:       ev.LastTimestamp,
		Count:               ev.Count,
		Type:                ev.Type,
		EventTime:           ev.EventTime,
		Series:              ev.Series.DeepCopy(),
		Action:              ev.Action,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
	}
	return out
}

// eventEqual compares what a mirrored event carries.
func eventEqual(want, have *corev1.Event) bool {
	return want.Count == have.Count && want.Message == have.Message && want.Reason == have.Reason &&
		want.Type == have.Type && want.LastTimestamp.Equal(&have.LastTimestamp) &&
		equality.Semantic.DeepEqual(want.Series, have.Series) && want.InvolvedObject == have.InvolvedObject
}
