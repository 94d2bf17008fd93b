package offloading

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// podRecord is which ShadowPods have had a real pod, by ShadowPod UID: what
// tells a recreation from a first creation without a status write per pod.
//
// It is fed by the pod informer's events, not by reconciles, so it holds
// every ShadowPod whose pod this process's cache ever listed or watched:
// after a restart, the informer's first list marks each ShadowPod whose pod
// still exists before any reconcile can see that pod gone. What it cannot
// know is a pod deleted and gone entirely while no controller manager ran;
// the ShadowPod's own record covers what survives that (status.podName,
// written along with any status write once a pod existed, and
// AnnotationPodLost, set by the consumer's virtual kubelet that saw the pod
// go).
type podRecord struct {
	mu   sync.Mutex
	uids map[types.UID]struct{}
	// synced tells whether the record has taken in the pod informer's first
	// list (nil: it has, as in tests that feed it by hand). The cache's own
	// sync does not say so: each handler receives its events on its own.
	synced func() bool
}

func newPodRecord() *podRecord { return &podRecord{uids: map[types.UID]struct{}{}} }

// saw marks the ShadowPod that controls pod, if any.
func (p *podRecord) saw(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "ShadowPod" || ref.APIVersion != ferryv1alpha1.GroupVersion.String() {
		return
	}
	p.mark(ref.UID)
}

func (p *podRecord) mark(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.uids[uid] = struct{}{}
}

// ready says whether the record holds every pod of the cache's first list.
func (p *podRecord) ready() bool { return p.synced == nil || p.synced() }

func (p *podRecord) had(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.uids[uid]
	return ok
}

func (p *podRecord) forget(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.uids, o.GetUID())
	}
}

// watch feeds the record from the cache's pod and ShadowPod informers. The
// cache runs whether or not this replica leads, so a standby's record is
// complete when it takes over.
func (p *podRecord) watch(ctx context.Context, c cache.Cache) error {
	pods, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	reg, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    p.saw,
		UpdateFunc: func(_, cur any) { p.saw(cur) },
		DeleteFunc: p.saw,
	})
	if err != nil {
		return fmt.Errorf("pod informer: %w", err)
	}
	p.synced = reg.HasSynced
	sps, err := c.GetInformer(ctx, &ferryv1alpha1.ShadowPod{})
	if err != nil {
		return fmt.Errorf("ShadowPod informer: %w", err)
	}
	if _, err := sps.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: p.forget}); err != nil {
		return fmt.Errorf("ShadowPod informer: %w", err)
	}
	return nil
}
