package peeringquota

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

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
	// APIReader reads, from the API server, the ShadowPod of a reservation
	// the cache has not seen (nil: such reservations wait for their TTL).
	APIReader client.Reader
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// unseenAfter is how long a reservation whose ShadowPod the cache has not
// seen waits before the API server is asked whether the ShadowPod exists:
// one created and deleted before a recount saw it would otherwise hold its
// room until quota.ReservationTTL.
const unseenAfter = 2 * time.Second

// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=peeringquotas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=shadowpods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile recounts one quota.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var q ferryv1alpha1.PeeringQuota
	if err := r.Get(ctx, req.NamespacedName, &q); err != nil {
		if apierrors.IsNotFound(err) {
			recordUsage(req.Namespace, req.Name, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	shadowPods, err := ConsumerShadowPods(ctx, r.Client, q.Spec.ConsumerClusterID)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	status, nextExpiry := quota.Recount(&q, shadowPods, now)
	var nextCheck time.Time
	status.Reservations, nextCheck = r.dropGone(ctx, status.Reservations, now)
	updated := q.DeepCopy()
	updated.Status = status
	setExceeded(updated)
	recordUsage(req.Namespace, req.Name, updated)
	var result ctrl.Result
	if !nextExpiry.IsZero() {
		result.RequeueAfter = nextExpiry.Sub(now) + time.Second
	}
	if !nextCheck.IsZero() && (result.RequeueAfter == 0 || nextCheck.Sub(now) < result.RequeueAfter) {
		result.RequeueAfter = nextCheck.Sub(now) + 100*time.Millisecond
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

// dropGone drops the reservations, older than unseenAfter, whose ShadowPod
// the API server no longer has (or has being deleted, under another UID,
// or short of the reserved generation: an update admitted and then not
// stored): they are gone before a recount saw them. It
// returns when the youngest of the others is due for that check.
func (r *Reconciler) dropGone(ctx context.Context, reservations []ferryv1alpha1.QuotaReservation, now time.Time) ([]ferryv1alpha1.QuotaReservation, time.Time) {
	if r.APIReader == nil {
		return reservations, time.Time{}
	}
	var kept []ferryv1alpha1.QuotaReservation
	var next time.Time
	for _, res := range reservations {
		if due := res.Time.Add(unseenAfter); now.Before(due) {
			kept = append(kept, res)
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		var sp ferryv1alpha1.ShadowPod
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: res.Name}, &sp)
		switch {
		case apierrors.IsNotFound(err), err == nil && (sp.UID != res.UID || !quota.Counts(&sp) || sp.Generation < res.Generation):
			log.FromContext(ctx).V(1).Info("Dropped the reservation of a ShadowPod gone unseen", "shadowPod", res.Namespace+"/"+res.Name, "uid", res.UID)
		default:
			if err != nil {
				log.FromContext(ctx).Error(err, "Could not read a reserved ShadowPod; its reservation stays", "shadowPod", res.Namespace+"/"+res.Name)
			}
			kept = append(kept, res)
		}
	}
	return kept, next
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
	if full := quota.Full(q); len(full) > 0 {
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

// SetupWithManager watches PeeringQuotas and, through their namespace's
// consumer, ShadowPods and twin namespaces.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := quota.IndexConsumer(ctx, mgr); err != nil {
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
	consumer := quota.ConsumerOfTwin(ns)
	if consumer == "" {
		return nil
	}
	var quotas ferryv1alpha1.PeeringQuotaList
	if err := r.List(ctx, &quotas, client.MatchingFields{quota.ConsumerIndex: string(consumer)}); err != nil {
		log.FromContext(ctx).Error(err, "List PeeringQuotas of consumer", "consumer", consumer)
		return nil
	}
	out := make([]reconcile.Request, len(quotas.Items))
	for i := range quotas.Items {
		out[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&quotas.Items[i])}
	}
	return out
}
