package fencing

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

// Reasons of the provider's Fenced condition and events.
const (
	ReasonLeaseExpired   = "LeaseExpired"
	ReasonLeaseRenewed   = "LeaseRenewed"
	ReasonNotArmed       = "LeaseNotArmed"
	ReasonSelfFencingOff = "SelfFencingDisabled"
)

// Fences is, on a provider, which consumers are fenced: the Fencer decides
// and the ShadowPod controller asks. Until the Fencer has decided for a
// consumer (right after a start), the answer is computed from the Lease in
// the cache on the wall clock alone.
type Fences struct {
	Reader client.Reader
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu      sync.Mutex
	decided map[ferryv1alpha1.ClusterID]bool
	// unfenced is when each consumer was last unfenced.
	unfenced map[ferryv1alpha1.ClusterID]time.Time
	// wake receives one event per ShadowPod of a consumer whose state
	// changed, for the ShadowPod controller.
	wake chan event.GenericEvent
}

// NewFences returns an empty set reading Leases from reader.
func NewFences(reader client.Reader) *Fences {
	return &Fences{Reader: reader, decided: map[ferryv1alpha1.ClusterID]bool{}, unfenced: map[ferryv1alpha1.ClusterID]time.Time{},
		wake: make(chan event.GenericEvent, 1024)}
}

// UnfenceWindow is how long after an unfence the ShadowPod controller reads
// a ShadowPod past the cache before it creates its pod: longer than the
// watches of a provider whose API server was down take to list again.
const UnfenceWindow = 2 * time.Minute

// RecentlyUnfenced tells whether the consumer was unfenced within
// UnfenceWindow.
func (f *Fences) RecentlyUnfenced(consumer ferryv1alpha1.ClusterID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.unfenced[consumer]
	return ok && time.Since(at) < UnfenceWindow
}

// Wake is the channel the ShadowPod controller watches.
func (f *Fences) Wake() <-chan event.GenericEvent { return f.wake }

func (f *Fences) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Fenced tells whether the consumer's pods must not run here.
func (f *Fences) Fenced(ctx context.Context, consumer ferryv1alpha1.ClusterID) (bool, error) {
	if consumer == "" {
		return false, nil
	}
	f.mu.Lock()
	d, ok := f.decided[consumer]
	f.mu.Unlock()
	if ok {
		return d, nil
	}
	var leases coordinationv1.LeaseList
	if err := f.Reader.List(ctx, &leases, client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: string(consumer)}); err != nil {
		return false, fmt.Errorf("list the Lease of consumer %s: %w", consumer, err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Name != ferryv1alpha1.ConsumerLeaseName || l.Annotations[ferryv1alpha1.AnnotationSelfFencing] != "true" {
			continue
		}
		if fenced, _ := ProviderFenced(f.now(), observe(l, nil)); fenced {
			return true, nil
		}
	}
	return false, nil
}

func (f *Fences) set(consumer ferryv1alpha1.ClusterID, fenced bool) (changed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old, ok := f.decided[consumer]
	f.decided[consumer] = fenced
	if ok && old && !fenced {
		f.unfenced[consumer] = time.Now()
	}
	return !ok || old != fenced
}

func (f *Fences) forget(consumer ferryv1alpha1.ClusterID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.decided, consumer)
}

// seen is when this process saw a Lease's renewTime change.
type seen struct {
	renewTime string
	at        time.Time // carries the monotonic reading
}

// observe is what lease tells, with s the last change this process saw.
func observe(l *coordinationv1.Lease, s *seen) Observation {
	o := Observation{}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		o.Armed = true
		o.RenewTime = l.Spec.RenewTime.Time
		o.Duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if s != nil {
		o.Seen, o.SinceChange = true, time.Since(s.at)
	}
	return o
}

func renewKey(l *coordinationv1.Lease) string {
	if l.Spec.RenewTime == nil {
		return ""
	}
	return l.Spec.RenewTime.Format(time.RFC3339Nano)
}

// Fencer runs on a provider: for each consumer it keeps the consumer's
// Lease in its tenant namespace (made here, annotated with whether this
// cluster self-fences), watches it, and fences the consumer when it expires:
// Fences says so to the ShadowPod controller, which deletes the consumer's
// pods and creates none, and the consumer's ForeignCluster gets Fenced=True
// and an event. A renewal unfences: the ShadowPods still present get their
// pods back.
type Fencer struct {
	client.Client
	Fences   *Fences
	Recorder events.EventRecorder

	mu   sync.Mutex
	seen map[string]seen // by ForeignCluster name
}

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=shadowpods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile follows one consumer's Lease.
func (r *Fencer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc ferryv1alpha1.ForeignCluster
	if err := r.Get(ctx, req.NamespacedName, &fc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetSeen(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !fc.Spec.IsConsumer() || !fc.DeletionTimestamp.IsZero() {
		r.forgetSeen(req.Name)
		r.Fences.forget(fc.Spec.ClusterID)
		return ctrl.Result{}, nil
	}
	tenant := peering.TenantNamespaceOf(&fc)
	lease, err := r.ensureLease(ctx, &fc, tenant)
	if err != nil || lease == nil {
		return ctrl.Result{}, err
	}
	s := r.observeChange(req.Name, lease)
	fenced, recheck := ProviderFenced(time.Now(), observe(lease, &s))
	reason, msg := ReasonLeaseRenewed, "the consumer renews its Lease "+tenant+"/"+ferryv1alpha1.ConsumerLeaseName
	switch {
	case !fc.Spec.Fencing.SelfFences():
		fenced, recheck = false, 0
		reason, msg = ReasonSelfFencingOff, "spec.fencing.selfFencing is false: the consumer's pods run whether or not it renews its Lease"
	case lease.Spec.RenewTime == nil:
		reason, msg = ReasonNotArmed, "the consumer has not renewed its Lease yet"
	case fenced:
		reason = ReasonLeaseExpired
		msg = fmt.Sprintf("the consumer's Lease %s/%s was last renewed at %s (by its clock), seen changing %s ago here; its duration is %ds: the consumer's pods are stopped and none is created until it renews",
			tenant, ferryv1alpha1.ConsumerLeaseName, lease.Spec.RenewTime.UTC().Format(time.RFC3339), time.Since(s.at).Round(time.Millisecond), *lease.Spec.LeaseDurationSeconds)
	}
	if r.Fences.set(fc.Spec.ClusterID, fenced) {
		logger := log.FromContext(ctx).WithValues("consumer", fc.Spec.ClusterID)
		if fenced {
			logger.Info("Fenced consumer: its Lease expired", "lease", tenant+"/"+ferryv1alpha1.ConsumerLeaseName)
			r.event(&fc, corev1.EventTypeWarning, ReasonLeaseExpired, msg)
		} else {
			logger.Info("Consumer not fenced", "reason", reason)
		}
		if err := r.wakeShadowPods(ctx, fc.Spec.ClusterID); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.setCondition(ctx, &fc, fenced, reason, msg); err != nil {
		return ctrl.Result{}, err
	}
	if recheck > 0 {
		// Wake just after the Lease would expire.
		return ctrl.Result{RequeueAfter: recheck + 50*time.Millisecond}, nil
	}
	return ctrl.Result{}, nil
}

// ensureLease makes the consumer's Lease, unarmed, and keeps its
// self-fencing annotation true to the spec.
func (r *Fencer) ensureLease(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, tenant string) (*coordinationv1.Lease, error) {
	want := strconv.FormatBool(fc.Spec.Fencing.SelfFences())
	var lease coordinationv1.Lease
	err := r.Get(ctx, types.NamespacedName{Namespace: tenant, Name: ferryv1alpha1.ConsumerLeaseName}, &lease)
	switch {
	case apierrors.IsNotFound(err):
		var ns corev1.Namespace
		if err := r.Get(ctx, types.NamespacedName{Name: tenant}, &ns); err != nil {
			return nil, client.IgnoreNotFound(err) // the tenant controller makes it, then updates the ForeignCluster, which wakes us
		}
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: ferryv1alpha1.ConsumerLeaseName, Namespace: tenant,
			Labels:      map[string]string{ferryv1alpha1.LabelOriginCluster: string(fc.Spec.ClusterID)},
			Annotations: map[string]string{ferryv1alpha1.AnnotationSelfFencing: want},
		}}
		if err := r.Create(ctx, &lease); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create the consumer's Lease %s/%s: %w", tenant, lease.Name, err)
		}
		return &lease, nil
	case err != nil:
		return nil, fmt.Errorf("read the consumer's Lease %s/%s: %w", tenant, ferryv1alpha1.ConsumerLeaseName, err)
	}
	if lease.Annotations[ferryv1alpha1.AnnotationSelfFencing] != want || lease.Labels[ferryv1alpha1.LabelOriginCluster] != string(fc.Spec.ClusterID) {
		patch := client.MergeFrom(lease.DeepCopy())
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Annotations[ferryv1alpha1.AnnotationSelfFencing] = want
		lease.Labels[ferryv1alpha1.LabelOriginCluster] = string(fc.Spec.ClusterID)
		if err := r.Patch(ctx, &lease, patch); err != nil {
			return nil, fmt.Errorf("annotate the consumer's Lease %s/%s: %w", tenant, lease.Name, err)
		}
	}
	return &lease, nil
}

// observeChange records when this process saw the Lease's renewTime change
// (the first sight counts as a change).
func (r *Fencer) observeChange(name string, lease *coordinationv1.Lease) seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]seen{}
	}
	key := renewKey(lease)
	s, ok := r.seen[name]
	if !ok || s.renewTime != key {
		s = seen{renewTime: key, at: time.Now()}
		r.seen[name] = s
	}
	return s
}

func (r *Fencer) forgetSeen(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, name)
}

// wakeShadowPods has the ShadowPod controller look again at every
// ShadowPod of the consumer.
func (r *Fencer) wakeShadowPods(ctx context.Context, consumer ferryv1alpha1.ClusterID) error {
	var sps ferryv1alpha1.ShadowPodList
	if err := r.List(ctx, &sps, client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: string(consumer)}); err != nil {
		return fmt.Errorf("list ShadowPods of consumer %s: %w", consumer, err)
	}
	for i := range sps.Items {
		select {
		case r.Fences.wake <- event.GenericEvent{Object: &sps.Items[i]}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (r *Fencer) setCondition(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, fenced bool, reason, msg string) error {
	st := metav1.ConditionFalse
	if fenced {
		st = metav1.ConditionTrue
	}
	if c := meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterFenced); c != nil && c.Status == st && c.Reason == reason {
		return nil
	}
	meta.SetStatusCondition(&fc.Status.Conditions, metav1.Condition{Type: ferryv1alpha1.ForeignClusterFenced, Status: st, Reason: reason, Message: msg, ObservedGeneration: fc.Generation})
	if err := r.Status().Update(ctx, fc); err != nil {
		return fmt.Errorf("update status of ForeignCluster %s: %w", fc.Name, err)
	}
	return nil
}

func (r *Fencer) event(fc *ferryv1alpha1.ForeignCluster, eventType, reason, note string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(fc, nil, eventType, reason, "Fence", "%s", note)
	}
}

// SetupWithManager registers the Fencer: it wakes for consumer
// ForeignClusters and for their Leases.
func (r *Fencer) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("fencer").
		For(&ferryv1alpha1.ForeignCluster{}).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.consumerOfLease),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == ferryv1alpha1.ConsumerLeaseName }))).
		Complete(r)
}

func (r *Fencer) consumerOfLease(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.consumersWhere(ctx, func(fc *ferryv1alpha1.ForeignCluster) bool {
		return peering.TenantNamespaceOf(fc) == obj.GetNamespace()
	})
}

func (r *Fencer) consumersWhere(ctx context.Context, match func(*ferryv1alpha1.ForeignCluster) bool) []reconcile.Request {
	var fcs ferryv1alpha1.ForeignClusterList
	if err := r.List(ctx, &fcs); err != nil {
		log.FromContext(ctx).Error(err, "List ForeignClusters")
		return nil
	}
	var out []reconcile.Request
	for i := range fcs.Items {
		if fcs.Items[i].Spec.IsConsumer() && match(&fcs.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&fcs.Items[i])})
		}
	}
	return out
}
