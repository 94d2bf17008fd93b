package peeringquota

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ConsumerIndex indexes PeeringQuotas by spec.consumerClusterID.
const ConsumerIndex = "spec.consumerClusterID"

// Reasons of a PeeringQuota's Exceeded condition.
const (
	ReasonFull     = "Full"
	ReasonRoomLeft = "RoomLeft"
)

// Reconciler keeps, on a provider, each PeeringQuota's status true: used is
// what its consumer's counting ShadowPods request (those in the consumer's
// twin namespaces, terminal and deleted ones excluded), reservations the
// webhook made are folded in once their ShadowPod is seen or dropped when
// it never came, and Exceeded says whether a limited resource is spent.
type Reconciler struct {
	client.Client
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=shadowpods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile recounts one quota.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var q ferryv1alpha1.PeeringQuota
	if err := r.Get(ctx, req.NamespacedName, &q); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	shadowPods, err := ConsumerShadowPods(ctx, r.Client, q.Spec.ConsumerClusterID)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	status, nextExpiry := Recount(&q, shadowPods, now)
	updated := q.DeepCopy()
	updated.Status = status
	setExceeded(updated)
	var result ctrl.Result
	if !nextExpiry.IsZero() {
		result.RequeueAfter = nextExpiry.Sub(now) + time.Second
	}
	if equality.Semantic.DeepEqual(q.Status, updated.Status) {
		return result, nil
	}
	// The update carries q's resourceVersion: when the webhook reserved room
	// meanwhile, it conflicts and the recount starts again.
	if err := r.Status().Update(ctx, updated); err != nil {
		return ctrl.Result{}, fmt.Errorf("update PeeringQuota %s status: %w", req, err)
	}
	log.FromContext(ctx).V(1).Info("Recounted PeeringQuota", "used", status.Used, "reservations", len(status.Reservations))
	return result, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func setExceeded(q *ferryv1alpha1.PeeringQuota) {
	cond := metav1.Condition{Type: ferryv1alpha1.PeeringQuotaExceeded, Status: metav1.ConditionFalse, Reason: ReasonRoomLeft,
		Message: "every limited resource has room left", ObservedGeneration: q.Generation}
	if full := Full(q); len(full) > 0 {
		names := make([]string, len(full))
		for i := range full {
			names[i] = string(full[i])
		}
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonFull
		cond.Message = "limit reached for " + strings.Join(names, ", ") + ": new ShadowPods requesting them are refused"
	}
	meta.SetStatusCondition(&q.Status.Conditions, cond)
}

// ConsumerShadowPods lists the ShadowPods in a consumer's twin namespaces
// (see IsTwinNamespaceOf), as the quota counts them.
func ConsumerShadowPods(ctx context.Context, c client.Reader, consumer ferryv1alpha1.ClusterID) ([]ferryv1alpha1.ShadowPod, error) {
	var namespaces corev1.NamespaceList
	twins := labels.SelectorFromSet(labels.Set{ferryv1alpha1.LabelOriginCluster: string(consumer)})
	hasOrigin, err := labels.NewRequirement(ferryv1alpha1.LabelOriginNamespace, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	twins = twins.Add(*hasOrigin)
	if err := c.List(ctx, &namespaces, client.MatchingLabelsSelector{Selector: twins}); err != nil {
		return nil, fmt.Errorf("list twin namespaces of consumer %s: %w", consumer, err)
	}
	var out []ferryv1alpha1.ShadowPod
	for _, ns := range namespaces.Items {
		var list ferryv1alpha1.ShadowPodList
		if err := c.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
			return nil, fmt.Errorf("list ShadowPods in %s: %w", ns.Name, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// IsTwinNamespaceOf says whether ns is a twin namespace made for consumer:
// it carries the consumer's ClusterID and the consumer namespace it stands
// for as origin labels (a tenant namespace carries only the first).
func IsTwinNamespaceOf(ns client.Object, consumer ferryv1alpha1.ClusterID) bool {
	l := ns.GetLabels()
	_, twin := l[ferryv1alpha1.LabelOriginNamespace]
	return twin && consumer != "" && l[ferryv1alpha1.LabelOriginCluster] == string(consumer)
}

// ConsumerOfTwin is the consumer a twin namespace was made for, or "".
func ConsumerOfTwin(ns client.Object) ferryv1alpha1.ClusterID {
	id := ferryv1alpha1.ClusterID(ns.GetLabels()[ferryv1alpha1.LabelOriginCluster])
	if !IsTwinNamespaceOf(ns, id) {
		return ""
	}
	return id
}

// IndexConsumer registers ConsumerIndex with the manager's cache.
func IndexConsumer(ctx context.Context, mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &ferryv1alpha1.PeeringQuota{}, ConsumerIndex, func(o client.Object) []string {
		return []string{string(o.(*ferryv1alpha1.PeeringQuota).Spec.ConsumerClusterID)}
	})
}

// SetupWithManager watches PeeringQuotas and, through their namespace's
// consumer, ShadowPods and twin namespaces.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := IndexConsumer(ctx, mgr); err != nil {
		return fmt.Errorf("index PeeringQuotas by consumer: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("peeringquota").
		For(&ferryv1alpha1.PeeringQuota{}).
		Watches(&ferryv1alpha1.ShadowPod{}, handler.EnqueueRequestsFromMapFunc(r.quotasOfNamespace)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.quotasOfTwin)).
		Complete(r)
}

func (r *Reconciler) quotasOfNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, &ns); err != nil {
		return nil
	}
	return r.quotasOfTwin(ctx, &ns)
}

func (r *Reconciler) quotasOfTwin(ctx context.Context, ns client.Object) []reconcile.Request {
	consumer := ConsumerOfTwin(ns)
	if consumer == "" {
		return nil
	}
	var quotas ferryv1alpha1.PeeringQuotaList
	if err := r.List(ctx, &quotas, client.MatchingFields{ConsumerIndex: string(consumer)}); err != nil {
		log.FromContext(ctx).Error(err, "List PeeringQuotas of consumer", "consumer", consumer)
		return nil
	}
	out := make([]reconcile.Request, len(quotas.Items))
	for i := range quotas.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&quotas.Items[i])}
	}
	return out
}
