package offloading

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons of a ShadowPod's PodCreated condition and events.
const (
	ReasonPodCreated   = "PodCreated"
	ReasonPodRecreated = "PodRecreated"
	ReasonPodConflict  = "PodConflict"
	ReasonPodCompleted = "PodCompleted"
	// ReasonResizeRefused: the provider refused to resize the pod in place.
	ReasonResizeRefused = "ResizeRefused"
)

// DefaultShadowPodWorkers is how many ShadowPods are reconciled at once.
const DefaultShadowPodWorkers = 16

// ShadowPodReconciler keeps, on a provider, exactly one real pod per
// ShadowPod: it creates it (same name, the template's spec and metadata, the
// consumer's origin labels, owned by the ShadowPod), recreates it when
// someone deletes it (counted in status.recreations) unless it ended for
// good under its restart policy, carries label, annotation and image changes
// to it, resizes it in place to the template's container resources, and
// deletes it before letting a deleted ShadowPod go.
type ShadowPodReconciler struct {
	client.Client
	// APIReader reads ShadowPods past the cache, when a recreation must be
	// counted on top of a status that changed meanwhile; nil uses Client.
	APIReader client.Reader
	// Recorder emits events on ShadowPods; nil records none.
	Recorder events.EventRecorder
	// Workers is how many ShadowPods are reconciled at once (default 16).
	Workers int
	// Fences tells which consumers are fenced (their Lease expired): their
	// pods are deleted and none is created. Nil fences none.
	Fences Fences

	// pods records which ShadowPods have had a pod (SetupWithManager
	// makes it; nil knows of none).
	pods *podRecord
}

// Fences is, on a provider, the set of fenced consumers.
type Fences interface {
	Fenced(ctx context.Context, consumer ferryv1alpha1.ClusterID) (bool, error)
	// RecentlyUnfenced: the consumer was unfenced lately, so the cache may
	// still hold ShadowPods it deleted before renewing its Lease.
	RecentlyUnfenced(consumer ferryv1alpha1.ClusterID) bool
	// Wake brings the ShadowPods of a consumer whose state changed.
	Wake() <-chan event.GenericEvent
}

// ReasonFenced: the consumer is fenced; its pod is stopped.
const ReasonFenced = "Fenced"

// FenceGracePeriod is the grace period of a fenced consumer's pods: short
// and bounded (the consumer's safety margin counts it), not zero, so the
// pod leaves the API only once its kubelet has stopped its containers.
const FenceGracePeriod int64 = 1

// fenceRetry is how soon a fenced pod's deletion is tried again.
const fenceRetry = time.Second

// +kubebuilder:rbac:groups=ferry.io,resources=shadowpods,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=shadowpods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile keeps one ShadowPod's real pod.
func (r *ShadowPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sp ferryv1alpha1.ShadowPod
	if err := r.Get(ctx, req.NamespacedName, &sp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var pod *corev1.Pod
	var current corev1.Pod
	if err := r.Get(ctx, req.NamespacedName, &current); err == nil {
		pod = &current
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("read pod %s: %w", req.NamespacedName, err)
	}
	if pod != nil && !metav1.IsControlledBy(pod, &sp) {
		return r.setStatus(ctx, &sp, func(st *ferryv1alpha1.ShadowPodStatus) {
			setCreated(st, sp.Generation, metav1.ConditionFalse, ReasonPodConflict,
				fmt.Sprintf("a pod named %s exists in %s that this ShadowPod does not control; it is left alone", sp.Name, sp.Namespace))
		})
	}

	if !sp.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, &sp, pod)
	}
	if r.Fences != nil {
		fenced, err := r.Fences.Fenced(ctx, ferryv1alpha1.ClusterID(sp.Labels[ferryv1alpha1.LabelOriginCluster]))
		if err != nil {
			return ctrl.Result{}, err
		}
		if fenced {
			return r.fence(ctx, &sp, pod)
		}
	}

	switch {
	case pod == nil:
		if r.Fences != nil && r.Fences.RecentlyUnfenced(ferryv1alpha1.ClusterID(sp.Labels[ferryv1alpha1.LabelOriginCluster])) {
			// A consumer back from a fence deleted its stale ShadowPods
			// before renewing; a cache that has not seen that yet must not
			// bring their pods back.
			if gone, err := r.deletedMeanwhile(ctx, &sp); err != nil || gone {
				return ctrl.Result{}, err
			}
		}
		return r.createPod(ctx, &sp)
	case !pod.DeletionTimestamp.IsZero():
		// Deleted by someone: its pod-deleted event wakes us to recreate it.
		return ctrl.Result{}, nil
	}
	if err := r.carryChanges(ctx, &sp, pod); err != nil {
		return ctrl.Result{}, err
	}
	refusal, err := r.resize(ctx, &sp, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.setStatus(ctx, &sp, func(st *ferryv1alpha1.ShadowPodStatus) {
		before := st.DeepCopy()
		st.Phase = endedPhase(pod.Status.Phase)
		if refusal == nil {
			meta.RemoveStatusCondition(&st.Conditions, ferryv1alpha1.ShadowPodResizeRefused)
		} else {
			meta.SetStatusCondition(&st.Conditions, *refusal)
		}
		if meta.FindStatusCondition(st.Conditions, ferryv1alpha1.ShadowPodCreated) != nil || !equality.Semantic.DeepEqual(st, before) {
			// Written anyway (or saying otherwise): record the pod too.
			st.PodName = pod.Name
			setCreated(st, sp.Generation, metav1.ConditionTrue, ReasonPodCreated, fmt.Sprintf("pod %s exists", pod.Name))
		}
	})
}

// recordSyncRetry is how soon a ShadowPod whose pod must be created is
// looked at again while the pod record takes in the cache's first list.
const recordSyncRetry = 100 * time.Millisecond

// hadPod tells whether sp has had a real pod: its status says so (a status
// written since its first pod, or by an earlier ferry that wrote one at
// each creation), the consumer's virtual kubelet saw the pod go
// (AnnotationPodLost), or this process's cache saw the pod.
func (r *ShadowPodReconciler) hadPod(sp *ferryv1alpha1.ShadowPod) bool {
	return sp.Status.PodName != "" || sp.Annotations[ferryv1alpha1.AnnotationPodLost] != "" || (r.pods != nil && r.pods.had(sp.UID))
}

// deletedMeanwhile reads sp past the cache and tells whether it is gone or
// being deleted (its deletion's event brings it back to release).
func (r *ShadowPodReconciler) deletedMeanwhile(ctx context.Context, sp *ferryv1alpha1.ShadowPod) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	var live ferryv1alpha1.ShadowPod
	if err := reader.Get(ctx, client.ObjectKeyFromObject(sp), &live); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read ShadowPod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return !live.DeletionTimestamp.IsZero(), nil
}

// fence stops the pod of a fenced consumer's ShadowPod and creates none.
func (r *ShadowPodReconciler) fence(ctx context.Context, sp *ferryv1alpha1.ShadowPod, pod *corev1.Pod) (ctrl.Result, error) {
	if pod != nil && (pod.DeletionTimestamp.IsZero() || pod.DeletionGracePeriodSeconds == nil || *pod.DeletionGracePeriodSeconds > FenceGracePeriod) {
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}, client.GracePeriodSeconds(FenceGracePeriod)); client.IgnoreNotFound(err) != nil {
			// Typically this cluster's API server is down: try again every
			// second rather than with the controller's growing back-off, so
			// the pod stops as soon as the API server returns.
			log.FromContext(ctx).Error(err, "Stop the pod of a fenced consumer", "pod", klogRef(pod))
			return ctrl.Result{RequeueAfter: fenceRetry}, nil
		}
		log.FromContext(ctx).Info("Stopped the pod of a fenced consumer", "pod", klogRef(pod))
		r.event(sp, corev1.EventTypeWarning, ReasonFenced, "Fence", "stopped pod "+pod.Name+": its consumer's Lease expired")
	}
	had := pod != nil || r.hadPod(sp)
	return r.setStatus(ctx, sp, func(st *ferryv1alpha1.ShadowPodStatus) {
		if had {
			st.PodName = sp.Name // the record of the pod that was
		}
		setCreated(st, sp.Generation, metav1.ConditionFalse, ReasonFenced,
			"the consumer's Lease expired: its pod is stopped and not created again until the consumer renews it")
	})
}

// resize resizes the pod in place, through its resize subresource, when the
// template's container resources differ from the pod's (the consumer
// resized its pod; the ShadowPod webhook charged any increase to the
// quota). The provider's refusal (its nodes cannot resize, a QoS class
// change, its own quotas) is returned as the ResizeRefused condition for
// the consumer to report; other errors are retried.
func (r *ShadowPodReconciler) resize(ctx context.Context, sp *ferryv1alpha1.ShadowPod, pod *corev1.Pod) (*metav1.Condition, error) {
	updated := pod.DeepCopy()
	if !setResources(updated.Spec.Containers, sp.Spec.Template.Spec.Containers) {
		return nil, nil
	}
	err := r.SubResource("resize").Update(ctx, updated)
	switch {
	case err == nil:
		log.FromContext(ctx).V(1).Info("Resized pod from its ShadowPod", "pod", klogRef(pod))
		return nil, nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		r.event(sp, corev1.EventTypeWarning, ReasonResizeRefused, "Resize", err.Error())
		return &metav1.Condition{Type: ferryv1alpha1.ShadowPodResizeRefused, Status: metav1.ConditionTrue,
			Reason: string(apierrors.ReasonForError(err)), Message: err.Error(), ObservedGeneration: sp.Generation}, nil
	}
	return nil, fmt.Errorf("resize pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// setResources gives the containers of have the resources of their
// namesakes in want, and tells whether any changed.
func setResources(have, want []corev1.Container) bool {
	changed := false
	for i := range have {
		for _, w := range want {
			if w.Name != have[i].Name {
				continue
			}
			if !equality.Semantic.DeepEqual(have[i].Resources, w.Resources) {
				have[i].Resources = *w.Resources.DeepCopy()
				changed = true
			}
		}
	}
	return changed
}

// createPod makes the real pod, unless it ended for good.
func (r *ShadowPodReconciler) createPod(ctx context.Context, sp *ferryv1alpha1.ShadowPod) (ctrl.Result, error) {
	if stays := terminalForGood(sp.Status.Phase, sp.Spec.Template.Spec.RestartPolicy); stays {
		return r.setStatus(ctx, sp, func(st *ferryv1alpha1.ShadowPodStatus) {
			setCreated(st, sp.Generation, metav1.ConditionFalse, ReasonPodCompleted,
				fmt.Sprintf("the pod ended %s with restartPolicy %s and is not created again", sp.Status.Phase, restartPolicy(sp)))
		})
	}
	if r.pods != nil && !r.pods.ready() {
		// A restarted process whose record has not taken in the first list
		// yet: the pod missing now may be one it lists, deleted since.
		return ctrl.Result{RequeueAfter: recordSyncRetry}, nil
	}
	recreation := r.hadPod(sp)
	if recreation {
		// A pod deleted from under a ShadowPod is rare, and the usual
		// deleter is the consumer's virtual kubelet carrying a deletion
		// whose ShadowPod this cache has not seen go yet (its watch may
		// be relisting after this API server restarted): one read past
		// the cache keeps the two from recreating and deleting the pod
		// in a loop until then.
		if gone, err := r.deletedMeanwhile(ctx, sp); err != nil || gone {
			return ctrl.Result{}, err
		}
	}
	pod, err := PodFor(sp, r.Scheme())
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil // the cache lags
		}
		reason := string(apierrors.ReasonForError(err))
		if reason == "" || reason == string(metav1.StatusReasonUnknown) {
			reason = "CreateFailed"
		}
		if _, serr := r.setStatus(ctx, sp, func(st *ferryv1alpha1.ShadowPodStatus) {
			setCreated(st, sp.Generation, metav1.ConditionFalse, reason, err.Error())
			if recreation {
				st.PodName = pod.Name // the record of the pod that was
			}
		}); serr != nil {
			return ctrl.Result{}, serr
		}
		r.event(sp, corev1.EventTypeWarning, "CreateFailed", "Create", err.Error())
		return ctrl.Result{}, fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if r.pods != nil {
		r.pods.mark(sp.UID)
	}
	logger := log.FromContext(ctx)
	if recreation {
		logger.Info("Recreated pod deleted from under its ShadowPod", "pod", klogRef(pod))
		r.event(sp, corev1.EventTypeNormal, ReasonPodRecreated, "Recreate", "recreated pod "+pod.Name+" after it was deleted")
	} else {
		logger.V(1).Info("Created pod", "pod", klogRef(pod))
	}
	created := func(st *ferryv1alpha1.ShadowPodStatus) {
		st.PodName, st.Phase = pod.Name, ""
		setCreated(st, sp.Generation, metav1.ConditionTrue, ReasonPodCreated, fmt.Sprintf("pod %s exists", pod.Name))
	}
	if !recreation {
		if meta.FindStatusCondition(sp.Status.Conditions, ferryv1alpha1.ShadowPodCreated) == nil {
			// A first pod costs no status write: the pod itself, then
			// the pod record, tell a later creation it is a recreation.
			return ctrl.Result{}, nil
		}
		// The status says why there was no pod (a refusal, a conflict, a
		// fence): that is over.
		return r.setStatus(ctx, sp, created)
	}
	return ctrl.Result{}, r.countRecreation(ctx, sp, created)
}

// countRecreation adds the recreation this reconcile just made to the
// status. Unlike other status changes it cannot be left to the next
// reconcile, which would not know of it: a conflict is retried on a fresh
// read.
func (r *ShadowPodReconciler) countRecreation(ctx context.Context, sp *ferryv1alpha1.ShadowPod, change func(*ferryv1alpha1.ShadowPodStatus)) error {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	first := true
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if !first {
			if err := reader.Get(ctx, client.ObjectKeyFromObject(sp), sp); err != nil {
				return err
			}
		}
		first = false
		sp.Status.ObservedGeneration = sp.Generation
		sp.Status.Recreations++
		change(&sp.Status)
		return r.Status().Update(ctx, sp)
	})
	if err != nil {
		return client.IgnoreNotFound(fmt.Errorf("count recreation of ShadowPod %s/%s: %w", sp.Namespace, sp.Name, err))
	}
	return nil
}

// carryChanges brings the pod's labels, annotations and images (the parts of
// a pod that may change) in line with the template.
func (r *ShadowPodReconciler) carryChanges(ctx context.Context, sp *ferryv1alpha1.ShadowPod, pod *corev1.Pod) error {
	want, err := PodFor(sp, r.Scheme())
	if err != nil {
		return err
	}
	updated := pod.DeepCopy()
	updated.Labels, updated.Annotations = want.Labels, want.Annotations
	setImages(updated.Spec.Containers, want.Spec.Containers)
	setImages(updated.Spec.InitContainers, want.Spec.InitContainers)
	if equality.Semantic.DeepEqual(updated.ObjectMeta, pod.ObjectMeta) && equality.Semantic.DeepEqual(updated.Spec, pod.Spec) {
		return nil
	}
	if err := r.Patch(ctx, updated, client.MergeFromWithOptions(pod, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	log.FromContext(ctx).V(1).Info("Updated pod from its ShadowPod", "pod", klogRef(pod))
	return nil
}

func setImages(have, want []corev1.Container) {
	images := map[string]string{}
	for _, c := range want {
		images[c.Name] = c.Image
	}
	for i := range have {
		if img, ok := images[have[i].Name]; ok {
			have[i].Image = img
		}
	}
}

// release deletes the real pod of a deleted ShadowPod and, once it is gone,
// lets the ShadowPod go.
func (r *ShadowPodReconciler) release(ctx context.Context, sp *ferryv1alpha1.ShadowPod, pod *corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(sp, ferryv1alpha1.ShadowPodFinalizer) {
		return nil
	}
	if pod != nil && metav1.IsControlledBy(pod, sp) {
		if pod.DeletionTimestamp.IsZero() {
			if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
		return nil // its deletion wakes us
	}
	controllerutil.RemoveFinalizer(sp, ferryv1alpha1.ShadowPodFinalizer)
	if err := r.Update(ctx, sp); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("release ShadowPod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	if r.pods != nil {
		r.pods.forget(sp)
	}
	return nil
}

// PodFor is the real pod of sp.
func PodFor(sp *ferryv1alpha1.ShadowPod, scheme *runtime.Scheme) (*corev1.Pod, error) {
	labels := map[string]string{}
	for k, v := range sp.Spec.Template.Metadata.Labels {
		labels[k] = v
	}
	for _, k := range []string{ferryv1alpha1.LabelOriginCluster, ferryv1alpha1.LabelOriginNamespace, ferryv1alpha1.LabelOriginName, ferryv1alpha1.LabelOriginUID} {
		if v, ok := sp.Labels[k]; ok {
			labels[k] = v
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sp.Name, Namespace: sp.Namespace, Labels: labels, Annotations: maps.Clone(sp.Spec.Template.Metadata.Annotations)},
		Spec:       *sp.Spec.Template.Spec.DeepCopy(),
	}
	if err := controllerutil.SetControllerReference(sp, pod, scheme); err != nil {
		return nil, fmt.Errorf("own pod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return pod, nil
}

// terminalForGood tells whether a pod that ended in phase stays ended under
// policy: a kubelet would not run it again either.
func terminalForGood(phase corev1.PodPhase, policy corev1.RestartPolicy) bool {
	switch phase {
	case corev1.PodSucceeded:
		return policy == corev1.RestartPolicyNever || policy == corev1.RestartPolicyOnFailure
	case corev1.PodFailed:
		return policy == corev1.RestartPolicyNever
	}
	return false
}

func restartPolicy(sp *ferryv1alpha1.ShadowPod) corev1.RestartPolicy {
	if p := sp.Spec.Template.Spec.RestartPolicy; p != "" {
		return p
	}
	return corev1.RestartPolicyAlways
}

func setCreated(st *ferryv1alpha1.ShadowPodStatus, generation int64, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ferryv1alpha1.ShadowPodCreated, Status: s, Reason: reason, Message: message, ObservedGeneration: generation})
}

// endedPhase is phase when the pod ended (Succeeded or Failed), else empty:
// a ShadowPod's status records only what its readers act on (the quota
// stops counting an ended pod, a pod ended for good is not recreated), so
// a pod's way to Running costs no ShadowPod write.
func endedPhase(phase corev1.PodPhase) corev1.PodPhase {
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
		return phase
	}
	return ""
}

// conflictRetry is how soon a status write refused for a stale read is
// tried again: the watch brings the newer ShadowPod within milliseconds,
// and its status-only change does not wake the controller by itself.
const conflictRetry = 200 * time.Millisecond

// setStatus applies change to sp's status and writes it when it changed
// (with the generation it was computed for, which alone is no change): at
// rest, and on a pod's way to Running, a ShadowPod costs no write.
func (r *ShadowPodReconciler) setStatus(ctx context.Context, sp *ferryv1alpha1.ShadowPod, change func(*ferryv1alpha1.ShadowPodStatus)) (ctrl.Result, error) {
	st := sp.Status.DeepCopy()
	change(st)
	if equality.Semantic.DeepEqual(st, &sp.Status) {
		return ctrl.Result{}, nil
	}
	st.ObservedGeneration = sp.Generation
	sp.Status = *st
	if err := r.Status().Update(ctx, sp); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return ctrl.Result{}, nil
		case apierrors.IsConflict(err):
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update status of ShadowPod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return ctrl.Result{}, nil
}

func (r *ShadowPodReconciler) event(sp *ferryv1alpha1.ShadowPod, eventType, reason, action, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(sp, nil, eventType, reason, action, "%s", note)
	}
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// SetupWithManager registers the reconciler. It wakes only for what it acts
// on: a ShadowPod's spec or metadata (not its own status writes), and a real
// pod deleted, ending or leaving its end, or with labels, annotations or
// images that differ from before (a pod it created wakes nothing: the
// ShadowPod's reconcile that made it is enough).
func (r *ShadowPodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultShadowPodWorkers
	}
	r.pods = newPodRecord()
	if err := r.pods.watch(context.Background(), mgr.GetCache()); err != nil {
		return fmt.Errorf("shadowpod controller: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Fences != nil {
		b = b.WatchesRawSource(source.Channel(r.Fences.Wake(), &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named("shadowpod").
		For(&ferryv1alpha1.ShadowPod{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return shadowPodChanged(e.ObjectOld, e.ObjectNew)
		}})).
		Owns(&corev1.Pod{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, okOld := e.ObjectOld.(*corev1.Pod)
				cur, okCur := e.ObjectNew.(*corev1.Pod)
				return !okOld || !okCur || podChanged(old, cur)
			},
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// shadowPodChanged tells whether an update of a ShadowPod changed more than
// its status.
func shadowPodChanged(old, cur client.Object) bool {
	return old.GetGeneration() != cur.GetGeneration() ||
		!maps.Equal(old.GetLabels(), cur.GetLabels()) ||
		!maps.Equal(old.GetAnnotations(), cur.GetAnnotations()) ||
		!slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) ||
		!old.GetDeletionTimestamp().Equal(cur.GetDeletionTimestamp())
}

// podChanged tells whether an update of a real pod is one its ShadowPod acts
// on: it ended or left its end (status.phase), or its labels, annotations or
// images changed (carried back to the template's).
func podChanged(old, cur *corev1.Pod) bool {
	if endedPhase(old.Status.Phase) != endedPhase(cur.Status.Phase) {
		return true
	}
	if !maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) {
		return true
	}
	images := func(p *corev1.Pod) []string {
		var out []string
		for _, c := range p.Spec.InitContainers {
			out = append(out, c.Image)
		}
		for _, c := range p.Spec.Containers {
			out = append(out, c.Image)
		}
		return out
	}
	return !slices.Equal(images(old), images(cur))
}
