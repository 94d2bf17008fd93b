package peering

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ferry-io/ferry/api/grant"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// GrantReconciler answers consumers' ResourceSlices on a provider. Without a
// fixed request, a consumer is granted SharingPercentage of the unrequested
// resources of the provider's eligible nodes (its own offloaded pods count
// as part of its grant); node and pod changes re-grant after Debounce, once
// for a burst of changes.
type GrantReconciler struct {
	client.Client
	// SharingPercentage of free resources granted by default (1-100).
	SharingPercentage int
	// Debounce delays re-granting after node and pod changes.
	Debounce time.Duration
	// Labels this provider adds to the labels it suggests for virtual nodes
	// (region and zone come from its nodes), e.g. ferry.io/provider=acme.
	Labels map[string]string
}

// +kubebuilder:rbac:groups=ferry.io,resources=resourceslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=resourceslices/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch

// Reconcile grants one ResourceSlice.
func (r *GrantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var slice ferryv1alpha1.ResourceSlice
	if err := r.Get(ctx, req.NamespacedName, &slice); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !slice.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pods: %w", err)
	}
	var classes storagev1.StorageClassList
	if err := r.List(ctx, &classes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list storage classes: %w", err)
	}
	consumer := string(slice.Spec.ConsumerClusterID)
	free := grant.ComputeFree(nodes.Items, pods.Items, func(p *corev1.Pod) bool {
		return p.Labels[ferryv1alpha1.LabelOriginCluster] != consumer
	})

	status := slice.Status.DeepCopy()
	status.ObservedGeneration = slice.Generation
	var granted corev1.ResourceList
	var err error
	if len(slice.Spec.Resources) > 0 {
		granted, err = grant.Fixed(slice.Spec.Resources, free.Total)
	} else {
		granted, err = grant.Share(free.Total, r.SharingPercentage)
	}
	cond := metav1.Condition{Type: ferryv1alpha1.ResourceSliceGranted, ObservedGeneration: slice.Generation}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Refused", err.Error()
		status.Resources, status.NodeShapes = nil, nil
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Granted", grantMessage(len(slice.Spec.Resources) > 0, r.SharingPercentage)
		status.Resources = granted
		status.NodeShapes = grant.Shapes(free)
		status.Labels = grant.SuggestedLabels(nodes.Items, r.Labels)
		status.Pools = nil
		if np := slice.Spec.NodePools; np != nil {
			cond.Message, err = r.grantPools(np.LabelKey, &slice, nodes.Items, free, status)
			if err != nil {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Refused", err.Error()
				status.Resources, status.NodeShapes, status.Pools = nil, nil, nil
			}
		}
	}
	status.StorageClasses = grant.StorageClassOffers(classes.Items)
	meta.SetStatusCondition(&status.Conditions, cond)
	if equality.Semantic.DeepEqual(status, &slice.Status) {
		return ctrl.Result{}, nil // nothing changed: no write
	}
	slice.Status = *status
	if err := r.Status().Update(ctx, &slice); err != nil {
		return ctrl.Result{}, fmt.Errorf("update grant of %s: %w", req, err)
	}
	log.FromContext(ctx).Info("Granted resources", "consumer", consumer, "resources", granted, "storageClasses", status.StorageClasses, "error", err)
	return ctrl.Result{}, nil
}

// grantPools fills status with one grant per pool of nodes split by key:
// resources become the pools' sum. It returns the Granted condition's
// message.
func (r *GrantReconciler) grantPools(key string, slice *ferryv1alpha1.ResourceSlice, nodes []corev1.Node, free grant.Free, status *ferryv1alpha1.ResourceSliceStatus) (string, error) {
	if err := ferryv1alpha1.ValidateNodePoolLabelKey("spec.nodePools.labelKey", key); err != nil {
		return "", err
	}
	pools, leftOut, err := grant.PoolGrants(nodes, free, key, slice.Spec.Resources, r.SharingPercentage, r.Labels)
	if err != nil {
		return "", err
	}
	total := corev1.ResourceList{}
	for _, p := range pools {
		for name, q := range p.Resources {
			sum := total[name]
			sum.Add(q)
			total[name] = sum
		}
	}
	status.Resources, status.NodeShapes, status.Pools = total, nil, pools
	msg := fmt.Sprintf("%s, in each of %d pools of nodes by label %s (nodes without it are not offered)", grantMessage(len(slice.Spec.Resources) > 0, r.SharingPercentage), len(pools), key)
	if len(leftOut) > 0 {
		msg += fmt.Sprintf("; at most %d pools are granted, left out: %s", ferryv1alpha1.MaxNodePools, someOf(leftOut))
	}
	return msg, nil
}

func grantMessage(fixed bool, percent int) string {
	if fixed {
		return "fixed request, capped by what is free"
	}
	return fmt.Sprintf("%d%% of the provider's unrequested resources", percent)
}

// SetupWithManager registers the reconciler: ResourceSlices directly, node,
// pod and StorageClass changes debounced into one re-grant of every slice.
func (r *GrantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if _, err := grant.Share(nil, r.SharingPercentage); err != nil {
		return fmt.Errorf("--sharing-percentage: %w", err)
	}
	regrant := &debouncedRegrant{c: mgr.GetClient(), delay: r.Debounce}
	return ctrl.NewControllerManagedBy(mgr).
		Named("grant").
		// Its own status writes do not wake it: with pods coming and going
		// each write found the free resources changed again and wrote
		// again, at the API server's pace rather than once per Debounce.
		For(&ferryv1alpha1.ResourceSlice{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, regrant).
		Watches(&corev1.Pod{}, regrant).
		Watches(&storagev1.StorageClass{}, regrant).
		Complete(r)
}

// debouncedRegrant enqueues every ResourceSlice after a delay on any node or
// pod event. The work queue keeps one pending entry per slice, so a burst of
// events costs one reconcile per slice.
type debouncedRegrant struct {
	c     client.Client
	delay time.Duration
}

var _ handler.EventHandler = &debouncedRegrant{}

func (d *debouncedRegrant) enqueueAll(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	var slices ferryv1alpha1.ResourceSliceList
	if err := d.c.List(ctx, &slices); err != nil {
		log.FromContext(ctx).Error(err, "List ResourceSlices to re-grant")
		return
	}
	for _, s := range slices.Items {
		q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}}, d.delay)
	}
}

func (d *debouncedRegrant) Create(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.enqueueAll(ctx, q)
}

func (d *debouncedRegrant) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !grantRelevantChange(e.ObjectOld, e.ObjectNew) {
		return // e.g. a node heartbeat: the grant cannot change
	}
	d.enqueueAll(ctx, q)
}

func (d *debouncedRegrant) Delete(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.enqueueAll(ctx, q)
}

func (d *debouncedRegrant) Generic(ctx context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.enqueueAll(ctx, q)
}

// grantRelevantChange filters node heartbeats and pod status churn that
// cannot change what is free, nor the region and zone the grant suggests.
func grantRelevantChange(old, cur client.Object) bool {
	switch o := old.(type) {
	case *corev1.Node:
		n := cur.(*corev1.Node)
		return grant.Eligible(o) != grant.Eligible(n) ||
			!equality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable) ||
			!maps.Equal(o.Labels, n.Labels)
	case *corev1.Pod:
		p := cur.(*corev1.Pod)
		return o.Spec.NodeName != p.Spec.NodeName || o.Status.Phase != p.Status.Phase ||
			!equality.Semantic.DeepEqual(grant.PodRequests(o), grant.PodRequests(p))
	}
	return true
}
