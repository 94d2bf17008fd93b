package offloading

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// brokenWatches is a provider client whose watches deliver nothing, as
// watches cut by an outage: informers keep what they listed last.
type brokenWatches struct{ client.WithWatch }

func (brokenWatches) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// outageBed is one offloaded pod, shop/web-1, running as shop-twin/web-1 on
// a provider whose health the test sets, with the controller that syncs it.
type outageBed struct {
	c        *controller
	kube     *kubefake.Clientset
	remote   client.WithWatch
	index    cache.Indexer
	provider atomic.Bool
}

func newOutageBed(t *testing.T, clusterScope bool) *outageBed {
	t.Helper()
	ctx := t.Context()
	local := boundPod()
	local.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	sp, err := ShadowPodFor(local, "consumer", "shop-twin", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	remote := runningRemote()
	remote.Namespace, remote.Labels = "shop-twin", sp.Labels
	remote.Status.Conditions = append(remote.Status.Conditions,
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: remote.Status.Conditions[0].LastTransitionTime})
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	b := &outageBed{kube: kubefake.NewClientset(local), index: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	b.remote = fake.NewClientBuilder().WithScheme(s).WithObjects(sp, remote).Build()
	b.provider.Store(true)
	b.c = &controller{
		cfg:   Config{NodeName: "ferry-provider", ConsumerClusterID: "consumer", ProviderClusterID: "provider", ProviderReady: b.provider.Load}.withDefaults(),
		local: b.kube, remote: brokenWatches{b.remote}, pods: corelisters.NewPodLister(b.index), podIndex: b.index,
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()),
		recorder: record.NewFakeRecorder(100), pending: newPendingClock(),
	}
	t.Cleanup(b.c.queue.ShutDown)
	b.c.reachable.Store(true)
	b.c.twins = &twins{provider: "provider", consumer: "consumer", remote: brokenWatches{b.remote},
		enqueue: func(types.NamespacedName) {}, namespaceChanged: func(string) {}}
	if clusterScope {
		b.c.twins.startShared(ctx)
	}
	b.c.twins.refresh(ctx, offloadedTo("shop"))
	return b
}

// sync syncs shop/web-1 as the informer would show it now, until it waits
// for nothing, and returns the pod as the API server has it then.
func (b *outageBed) sync(t *testing.T) *corev1.Pod {
	t.Helper()
	key := types.NamespacedName{Namespace: "shop", Name: "web-1"}
	waitFor(t, "a sync that waits for nothing", func() bool {
		p, err := b.kube.CoreV1().Pods("shop").Get(t.Context(), "web-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.index.Update(p); err != nil {
			t.Fatal(err)
		}
		requeue, err := b.c.sync(t.Context(), key)
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		return requeue == 0
	})
	p, err := b.kube.CoreV1().Pods("shop").Get(t.Context(), "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// statusWrites counts the pod status updates sent to the local cluster.
func (b *outageBed) statusWrites() int {
	n := 0
	for _, a := range b.kube.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestPodsAreNotReadyWhileTheProviderIsUnreachableAndTakeFreshStatusOnceBack(t *testing.T) {
	for _, scope := range []struct {
		name    string
		cluster bool
	}{{"namespace scope", false}, {"cluster scope", true}} {
		t.Run(scope.name, func(t *testing.T) {
			b := newOutageBed(t, scope.cluster)
			waitFor(t, "twin of shop synced", func() bool { return b.c.twins.forLocal("shop") != nil && b.c.twins.forLocal("shop").view().synced() })

			p := b.sync(t)
			if c := podCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
				t.Fatalf("with the provider reachable, Ready = %+v: want True, from the remote pod", c)
			}

			// the provider stops answering health checks.
			b.provider.Store(false)
			b.c.followHealth(t.Context())
			writes := b.statusWrites()
			p = b.sync(t)
			for _, ct := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				if c := podCondition(p, ct); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonProviderUnreachable {
					t.Errorf("provider unreachable: %s = %+v, want False with reason %s", ct, c, ReasonProviderUnreachable)
				}
			}
			if p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 2 {
				t.Errorf("provider unreachable: phase %s, restarts %d: want Running and 2 as last known", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
			}

			// the pod changes locally during the outage; the provider's pod restarts, unseen by the cut watches.
			p.Labels["rev"] = "2"
			if _, err := b.kube.CoreV1().Pods("shop").Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			p = b.sync(t)
			if c := podCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionFalse {
				t.Errorf("a pod updated during the outage: Ready = %+v, want still False", c)
			}
			if n := b.statusWrites() - writes; n != 1 {
				t.Errorf("%d status writes during the outage: want exactly one", n)
			}
			remote := &corev1.Pod{}
			if err := b.remote.Get(t.Context(), client.ObjectKey{Namespace: "shop-twin", Name: "web-1"}, remote); err != nil {
				t.Fatal(err)
			}
			remote.Status.ContainerStatuses[0].RestartCount = 7
			if err := b.remote.Status().Update(t.Context(), remote); err != nil {
				t.Fatal(err)
			}

			// the provider answers again.
			b.provider.Store(true)
			b.c.followHealth(t.Context())
			p = b.sync(t)
			if c := podCondition(p, corev1.PodReady); c == nil || c.Status != corev1.ConditionTrue {
				t.Errorf("provider back: Ready = %+v, want True, from the remote pod", c)
			}
			if got := p.Status.ContainerStatuses[0].RestartCount; got != 7 {
				t.Errorf("provider back: restarts %d, want 7 as the provider has it now (2 is the cache from before the outage)", got)
			}
		})
	}
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	return podConditionIn(p.Status.Conditions, t)
}
