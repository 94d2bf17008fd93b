package quota

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ReservationTTL is how long a reservation waits for its ShadowPod to be
// counted. A create admitted by the webhook and then refused further on (a
// name conflict, another webhook) never produces a ShadowPod; its
// reservation holds room, on the safe side, until it expires.
const ReservationTTL = time.Minute

// Charged is what a quota has spent: the ShadowPods counted in status.used
// plus every reservation but except's (a retried admission of the same
// ShadowPod does not count itself twice).
func Charged(q *ferryv1alpha1.PeeringQuota, except types.UID) corev1.ResourceList {
	charged := corev1.ResourceList{}
	for name := range q.Spec.Limits {
		charged[name] = q.Status.Used[name].DeepCopy()
	}
	for _, r := range q.Status.Reservations {
		if r.UID == except {
			continue
		}
		for name, amount := range r.Requests {
			if c, limited := charged[name]; limited {
				c.Add(amount)
				charged[name] = c
			}
		}
	}
	return charged
}

// Reserve charges sp's requests to q.Status.Reservations when they fit and
// says, per resource, where they do not. It changes q only in memory: the
// caller writes the status with q's resourceVersion, so a concurrent charge
// makes the write fail and the check start again on fresh data.
// changed is false when sp holds a reservation already.
func Reserve(q *ferryv1alpha1.PeeringQuota, sp *ferryv1alpha1.ShadowPod, now time.Time) (exceeded []string, changed bool) {
	requests := limited(ShadowPodRequests(sp), q.Spec.Limits)
	if exceeded := Exceeded(q.Spec.Limits, Charged(q, sp.UID), requests); len(exceeded) > 0 {
		return exceeded, false
	}
	if slices.ContainsFunc(q.Status.Reservations, func(r ferryv1alpha1.QuotaReservation) bool { return r.UID == sp.UID }) {
		return nil, false
	}
	q.Status.Reservations = append(q.Status.Reservations, ferryv1alpha1.QuotaReservation{
		UID: sp.UID, Namespace: sp.Namespace, Name: sp.Name, Requests: requests, Time: metav1.NewTime(now), Generation: sp.Generation,
	})
	return nil, true
}

// ReserveUpdate charges an update of a ShadowPod from old to sp that raises
// its requests, in q's status like Reserve. While sp's create reservation
// is pending (its requests not yet in used) the reservation is raised to
// the new requests; otherwise used counts old's requests and only the
// increase is reserved. An update that raises nothing changes nothing: a
// decrease shows in used at the next recount. changed is false when q needs
// no write.
func ReserveUpdate(q *ferryv1alpha1.PeeringQuota, old, sp *ferryv1alpha1.ShadowPod, now time.Time) (exceeded []string, changed bool) {
	requests := limited(ShadowPodRequests(sp), q.Spec.Limits)
	counted := corev1.ResourceList{}
	i := slices.IndexFunc(q.Status.Reservations, func(r ferryv1alpha1.QuotaReservation) bool { return r.UID == sp.UID })
	switch {
	case i >= 0:
		counted = q.Status.Reservations[i].Requests
	case Counts(old):
		counted = limited(ShadowPodRequests(old), q.Spec.Limits)
	}
	increase := corev1.ResourceList{}
	for name, want := range requests {
		if have := counted[name]; want.Cmp(have) > 0 {
			want.Sub(have)
			increase[name] = want
		}
	}
	if len(increase) == 0 {
		return nil, false
	}
	// Charged leaves out sp's own reservation: a pending one is replaced by
	// the new requests; otherwise used holds old's and the increase is added.
	add := increase
	if i >= 0 {
		add = requests
	}
	if exceeded := Exceeded(q.Spec.Limits, Charged(q, sp.UID), add); len(exceeded) > 0 {
		return exceeded, false
	}
	r := ferryv1alpha1.QuotaReservation{UID: sp.UID, Namespace: sp.Namespace, Name: sp.Name, Time: metav1.NewTime(now), Generation: sp.Generation}
	if i >= 0 {
		r.Requests = requests
		q.Status.Reservations[i] = r
	} else {
		r.Requests = increase
		q.Status.Reservations = append(q.Status.Reservations, r)
	}
	return nil, true
}

// Release undoes a reservation this admission made in q: it puts back prior
// (the ShadowPod's reservation before, nil when it had none). It reports
// whether q changed.
func Release(q *ferryv1alpha1.PeeringQuota, uid types.UID, prior *ferryv1alpha1.QuotaReservation) bool {
	i := slices.IndexFunc(q.Status.Reservations, func(r ferryv1alpha1.QuotaReservation) bool { return r.UID == uid })
	switch {
	case i < 0 && prior == nil:
		return false
	case i < 0:
		q.Status.Reservations = append(q.Status.Reservations, *prior.DeepCopy())
	case prior == nil:
		q.Status.Reservations = slices.Delete(q.Status.Reservations, i, i+1)
	default:
		q.Status.Reservations[i] = *prior.DeepCopy()
	}
	return true
}

// ReservationOf is q's reservation for uid, or nil.
func ReservationOf(q *ferryv1alpha1.PeeringQuota, uid types.UID) *ferryv1alpha1.QuotaReservation {
	for i := range q.Status.Reservations {
		if q.Status.Reservations[i].UID == uid {
			return q.Status.Reservations[i].DeepCopy()
		}
	}
	return nil
}

// Recount is q's status once the consumer's ShadowPods are known: used is
// what the counting ones request; a reservation is dropped once its
// ShadowPod is seen at the reservation's generation or a later one (counted
// in used, or not counting at all) or when it has waited ReservationTTL. It returns when the oldest remaining reservation
// expires (zero when none remains).
func Recount(q *ferryv1alpha1.PeeringQuota, shadowPods []ferryv1alpha1.ShadowPod, now time.Time) (status ferryv1alpha1.PeeringQuotaStatus, nextExpiry time.Time) {
	status = *q.Status.DeepCopy()
	status.ObservedGeneration = q.Generation
	status.Used = Usage(shadowPods, q.Spec.Limits)
	seen := make(map[types.UID]int64, len(shadowPods))
	for i := range shadowPods {
		seen[shadowPods[i].UID] = shadowPods[i].Generation
	}
	status.Reservations = nil
	for _, r := range q.Status.Reservations {
		expires := r.Time.Add(ReservationTTL)
		if generation, ok := seen[r.UID]; (ok && generation >= r.Generation) || !now.Before(expires) {
			continue
		}
		status.Reservations = append(status.Reservations, r)
		if nextExpiry.IsZero() || expires.Before(nextExpiry) {
			nextExpiry = expires
		}
	}
	return status, nextExpiry
}

// Full lists the limited resources the quota has spent entirely, in name
// order.
func Full(q *ferryv1alpha1.PeeringQuota) []corev1.ResourceName {
	charged := Charged(q, "")
	var full []corev1.ResourceName
	for name, limit := range q.Spec.Limits {
		if c := charged[name]; c.Cmp(limit) >= 0 {
			full = append(full, name)
		}
	}
	slices.Sort(full)
	return full
}

func limited(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range requests {
		if _, ok := limits[name]; ok {
			out[name] = q.DeepCopy()
		}
	}
	return out
}
