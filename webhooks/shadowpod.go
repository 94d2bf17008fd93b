package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/ferry-io/ferry/api/podsecurity"
	"github.com/ferry-io/ferry/api/quota"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// maxQuotaAttempts bounds how often a charge is retried after losing a
// race for a PeeringQuota to another admission.
const maxQuotaAttempts = 8

// ShadowPodValidator guards a provider against its consumers: a consumer
// (the ferry-consumer ServiceAccount of its tenant namespace) writes
// ShadowPods only in its own twin namespaces and only under its own
// ClusterID; a new or changed template must meet the consumer's Pod
// Security level (api/podsecurity); a new ShadowPod, or an update raising
// its requests, is admitted only when the requests (or the increase) fit in
// every PeeringQuota of the twin namespace's consumer. Room is reserved in
// the quota's status by an update carrying the resourceVersion read, so
// concurrent admissions, in this replica or another, serialize on the
// quota: of two ShadowPods where only one fits, one is refused.
type ShadowPodValidator struct {
	// Reader reads Namespaces, ForeignClusters and PeeringQuotas (a cache: quotas are read
	// again from APIReader after a lost race).
	Reader client.Reader
	// APIReader reads PeeringQuotas from the API server.
	APIReader client.Reader
	// Writer writes PeeringQuota status.
	Writer  client.StatusClient
	Decoder admission.Decoder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Handle implements admission.Handler.
func (v *ShadowPodValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	sp := &ferryv1alpha1.ShadowPod{}
	if resp, ok := decodeWrite(v.Decoder, req, sp, nil); !ok {
		return resp
	}
	var ns corev1.Namespace
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read namespace %s: %w", req.Namespace, err))
	}
	owner := quota.ConsumerOfTwin(&ns)
	requester, err := v.requestingConsumer(ctx, req.UserInfo.Username)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if requester != "" {
		if owner != requester {
			return admission.Denied(fmt.Sprintf("consumer %s may write ShadowPods only in its own twin namespaces: namespace %s is not one", requester, req.Namespace))
		}
		var errs field.ErrorList
		if got := sp.Spec.ConsumerClusterID; got != requester {
			errs = append(errs, field.Invalid(field.NewPath("spec", "consumerClusterID"), got, fmt.Sprintf("must be the requesting consumer's ClusterID, %s", requester)))
		}
		if got := sp.Labels[ferryv1alpha1.LabelOriginCluster]; got != string(requester) {
			path := field.NewPath("metadata", "labels").Key(ferryv1alpha1.LabelOriginCluster)
			errs = append(errs, field.Invalid(path, got, fmt.Sprintf("must be the requesting consumer's ClusterID, %s", requester)))
		}
		if len(errs) > 0 {
			return admission.Denied(errs.ToAggregate().Error())
		}
	}
	if owner == "" {
		return admission.Allowed("")
	}
	var old *ferryv1alpha1.ShadowPod
	if req.Operation == admissionv1.Update {
		old = &ferryv1alpha1.ShadowPod{}
		if err := v.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode old ShadowPod: %w", err))
		}
	}
	// Pod security: every new template, whoever writes it. A write that
	// leaves the template alone (labels, finalizers) passes, so a level
	// tightened later does not wedge ShadowPods admitted before.
	if old == nil || !equality.Semantic.DeepEqual(old.Spec.Template, sp.Spec.Template) {
		var fcs ferryv1alpha1.ForeignClusterList
		if err := v.Reader.List(ctx, &fcs); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list ForeignClusters: %w", err))
		}
		level := podsecurity.LevelOf(fcs.Items, owner)
		meta := metav1.ObjectMeta{Labels: sp.Spec.Template.Metadata.Labels, Annotations: sp.Spec.Template.Metadata.Annotations}
		if err := podsecurity.Check(level, &meta, &sp.Spec.Template.Spec); err != nil {
			return invalid(fmt.Sprintf("spec.template: consumer %s's pods must meet the %s level here: %v", owner, level, err))
		}
		errs, err := checkNodeConstraints(ctx, v.Reader, owner, &sp.Spec.Template.Spec)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if len(errs) > 0 {
			return invalid(errs.ToAggregate().Error())
		}
	}
	if !quota.Counts(sp) {
		return admission.Allowed("")
	}
	return v.charge(ctx, owner, old, sp)
}

// invalid denies a template the provider will not take as it is, whenever
// it is asked again (unlike an exceeded quota, which is Forbidden and may
// pass later): HTTP 422 with reason Invalid, which the consumer's virtual
// kubelet reads as a permanent refusal and fails the pod.
func invalid(msg string) admission.Response {
	resp := admission.Denied(msg)
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	return resp
}

// requestingConsumer is the consumer whose credential made the request, or
// "" for any other user.
func (v *ShadowPodValidator) requestingConsumer(ctx context.Context, username string) (ferryv1alpha1.ClusterID, error) {
	namespace, name, err := serviceaccount.SplitUsername(username)
	if err != nil || name != ferryv1alpha1.ConsumerServiceAccount {
		return "", nil
	}
	var tenant corev1.Namespace
	if err := v.Reader.Get(ctx, client.ObjectKey{Name: namespace}, &tenant); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("read tenant namespace %s: %w", namespace, err)
	}
	if _, twin := tenant.Labels[ferryv1alpha1.LabelOriginNamespace]; twin {
		return "", nil
	}
	return ferryv1alpha1.ClusterID(tenant.Labels[ferryv1alpha1.LabelOriginCluster]), nil
}

// charge reserves sp's requests (a create, old nil) or their increase over
// old's (an update) in every quota of consumer, or denies; a denial takes
// back what this admission reserved in the quotas before.
func (v *ShadowPodValidator) charge(ctx context.Context, consumer ferryv1alpha1.ClusterID, old, sp *ferryv1alpha1.ShadowPod) admission.Response {
	var quotas ferryv1alpha1.PeeringQuotaList
	if err := v.Reader.List(ctx, &quotas, client.MatchingFields{quota.ConsumerIndex: string(consumer)}); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list PeeringQuotas of consumer %s: %w", consumer, err))
	}
	var made []reservation
	for i := range quotas.Items {
		r, resp := v.reserve(ctx, &quotas.Items[i], old, sp)
		if !resp.Allowed {
			for _, r := range made {
				v.release(ctx, r, sp.UID)
			}
			return resp
		}
		if r != nil {
			made = append(made, *r)
		}
	}
	return admission.Allowed("")
}

// reservation is one this admission wrote: in which quota, and the
// ShadowPod's reservation there before (nil when it had none).
type reservation struct {
	quota client.ObjectKey
	prior *ferryv1alpha1.QuotaReservation
}

func (v *ShadowPodValidator) reserve(ctx context.Context, q *ferryv1alpha1.PeeringQuota, old, sp *ferryv1alpha1.ShadowPod) (*reservation, admission.Response) {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	key := client.ObjectKeyFromObject(q)
	for attempt := 1; ; attempt++ {
		prior := quota.ReservationOf(q, sp.UID)
		var exceeded []string
		var changed bool
		if old == nil {
			exceeded, changed = quota.Reserve(q, sp, now())
		} else {
			exceeded, changed = quota.ReserveUpdate(q, old, sp, now())
		}
		if len(exceeded) > 0 {
			return nil, admission.Denied(quota.QuotaDenial(q.Spec.ConsumerClusterID, exceeded) + fmt.Sprintf(" (PeeringQuota %s)", key))
		}
		if !changed {
			return nil, admission.Allowed("")
		}
		err := v.Writer.Status().Update(ctx, q)
		if err == nil {
			log.FromContext(ctx).V(1).Info("Reserved quota", "peeringQuota", key, "shadowPod", client.ObjectKeyFromObject(sp), "update", old != nil, "attempt", attempt)
			return &reservation{quota: key, prior: prior}, admission.Allowed("")
		}
		if !apierrors.IsConflict(err) || attempt == maxQuotaAttempts {
			return nil, admission.Errored(http.StatusInternalServerError, fmt.Errorf("reserve room in PeeringQuota %s: %w", key, err))
		}
		// Lost the race: someone charged the quota meanwhile. Start again
		// from what the API server holds now.
		q = &ferryv1alpha1.PeeringQuota{}
		if err := v.APIReader.Get(ctx, key, q); err != nil {
			return nil, admission.Errored(http.StatusInternalServerError, fmt.Errorf("read PeeringQuota %s: %w", key, err))
		}
	}
}

// release puts back what reserve wrote in one quota, after another quota
// denied the same admission. It retries conflicts; when it cannot write,
// the reservation expires after quota.ReservationTTL.
func (v *ShadowPodValidator) release(ctx context.Context, r reservation, uid types.UID) {
	for attempt := 1; attempt <= maxQuotaAttempts; attempt++ {
		q := &ferryv1alpha1.PeeringQuota{}
		err := v.APIReader.Get(ctx, r.quota, q)
		if err == nil {
			if !quota.Release(q, uid, r.prior) {
				return
			}
			err = v.Writer.Status().Update(ctx, q)
		}
		if err == nil {
			log.FromContext(ctx).V(1).Info("Released quota reservation", "peeringQuota", r.quota, "uid", uid)
			return
		}
		if !apierrors.IsConflict(err) {
			log.FromContext(ctx).Error(err, "Could not release a quota reservation; it expires by itself", "peeringQuota", r.quota, "uid", uid)
			return
		}
	}
}
