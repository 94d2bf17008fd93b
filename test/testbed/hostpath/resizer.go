package hostpath

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Event reasons on claims, as the CSI external-resizer records them.
const (
	EventResizing       = "Resizing"
	EventResizeFailed   = "VolumeResizeFailed"
	EventResizeFinished = "VolumeResizeSuccessful"
)

// Resizer expands the volumes of a Provisioner as the CSI external-resizer
// expands a driver's (with the RecoverVolumeExpansionFailure API, GA in
// Kubernetes 1.34): for a bound claim of a class of provisionerName asking
// for more than its capacity, it marks the claim ControllerResizeInProgress
// (allocatedResources, condition Resizing), grows the volume
// (Provisioner.Expand), sets the PersistentVolume's capacity, and, since a
// hostPath directory needs no file system resize on the node (kubelet has
// nothing to do for it), marks the expansion finished: the claim's capacity
// is the new size and no resize status or condition stays. An expansion the
// node has no room for leaves ControllerResizeInfeasible and a
// ControllerResizeError condition, and a VolumeResizeFailed event.
// kube-controller-manager's expand controller leaves such claims to it
// ("waiting for an external controller to expand this PVC").
type Resizer struct {
	kube        kubernetes.Interface
	provisioner *Provisioner
	name        string
	claims      corelisters.PersistentVolumeClaimLister
	volumes     corelisters.PersistentVolumeLister
	classes     storagelisters.StorageClassLister
	recorder    record.EventRecorder
	queue       workqueue.TypedRateLimitingInterface[string]
}

// NewResizer returns a Resizer of the volumes p makes for classes naming
// provisionerName, reading claims, volumes and classes from f's informers
// (their handlers are added here; the caller starts f), writing through
// kube and recording events with recorder.
func NewResizer(kube kubernetes.Interface, provisionerName string, p *Provisioner, f informers.SharedInformerFactory, recorder record.EventRecorder) (*Resizer, error) {
	r := &Resizer{
		kube: kube, provisioner: p, name: provisionerName, recorder: recorder,
		claims:  f.Core().V1().PersistentVolumeClaims().Lister(),
		volumes: f.Core().V1().PersistentVolumes().Lister(),
		classes: f.Storage().V1().StorageClasses().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "hostpath-resizer"}),
	}
	enqueue := func(obj any) {
		pvc, ok := obj.(*corev1.PersistentVolumeClaim)
		if !ok {
			return
		}
		if _, needed := NeedsResize(pvc); needed {
			r.queue.Add(cache.MetaObjectToName(pvc).String())
		}
	}
	if _, err := f.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, fmt.Errorf("hostpath resizer: watch claims: %w", err)
	}
	return r, nil
}

// Run resizes with workers goroutines until ctx ends, and returns once
// they have.
func (r *Resizer) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

func (r *Resizer) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Resize failed, retrying", "claim", key)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// sync resizes one claim's volume when it asks for it.
func (r *Resizer) sync(ctx context.Context, key string) error {
	name, err := cache.ParseObjectName(key)
	if err != nil {
		return nil
	}
	pvc, err := r.claims.PersistentVolumeClaims(name.Namespace).Get(name.Name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	size, needed := NeedsResize(pvc)
	if !needed {
		return nil
	}
	pv, err := r.volumes.Get(pvc.Spec.VolumeName)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if !r.provisioner.Owns(pv) || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return nil
	}
	class, err := r.classes.Get(pv.Spec.StorageClassName)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if class.Provisioner != r.name || !ptr.Deref(class.AllowVolumeExpansion, false) {
		return nil
	}
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(size) == 0 &&
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible {
		return nil // refused as asked: tried again when the request changes
	}
	logger := klog.FromContext(ctx).WithValues("claim", key, "volume", pv.Name)
	claims := r.kube.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; !ok || allocated.Cmp(size) != 0 ||
		pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress {
		if pvc, err = claims.UpdateStatus(ctx, ResizeInProgress(pvc, size, metav1.Now()), metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("mark claim %s resizing: %w", key, err)
		}
		r.recorder.Eventf(pvc, corev1.EventTypeNormal, EventResizing, "External resizer is resizing volume %s", pv.Name)
	}
	grown, err := r.provisioner.Expand(ctx, pv, class, size)
	if errors.Is(err, ErrInfeasible) {
		if _, uerr := claims.UpdateStatus(ctx, ResizeInfeasible(pvc, err.Error(), metav1.Now()), metav1.UpdateOptions{}); uerr != nil {
			return fmt.Errorf("mark claim %s infeasible to resize: %w", key, uerr)
		}
		r.recorder.Event(pvc, corev1.EventTypeWarning, EventResizeFailed, err.Error())
		logger.Info("Resize infeasible", "size", size.String(), "err", err)
		return nil
	} else if err != nil {
		r.recorder.Event(pvc, corev1.EventTypeWarning, EventResizeFailed, err.Error())
		return err
	}
	if current := pv.Spec.Capacity[corev1.ResourceStorage]; current.Cmp(grown) < 0 {
		grownPV := pv.DeepCopy()
		grownPV.Spec.Capacity[corev1.ResourceStorage] = grown
		if _, err := r.kube.CoreV1().PersistentVolumes().Update(ctx, grownPV, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set capacity %s on volume %s: %w", grown.String(), pv.Name, err)
		}
	}
	if _, err := claims.UpdateStatus(ctx, ResizeFinished(pvc, grown), metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("mark claim %s resized: %w", key, err)
	}
	r.recorder.Event(pvc, corev1.EventTypeNormal, EventResizeFinished, "Resize volume succeeded")
	logger.Info("Resized", "size", grown.String())
	return nil
}
