package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/controllers/peeringquota"
)

// maxQuotaAttempts bounds how often a charge is retried after losing a
// race for a PeeringQuota to another admission.
const maxQuotaAttempts = 8

// ShadowPodValidator guards a provider against its consumers: a consumer
// (the ferry-consumer ServiceAccount of its tenant namespace) writes
// ShadowPods only in its own twin namespaces and only under its own
// ClusterID, and a new ShadowPod is admitted only when its requests fit in
// every PeeringQuota of the twin namespace's consumer. Room is reserved in
// the quota's status by an update carrying the resourceVersion read, so
// concurrent admissions, in this replica or another, serialize on the
// quota: of two ShadowPods where only one fits, one is refused.
type ShadowPodValidator struct {
	// Reader reads Namespaces and PeeringQuotas (a cache: quotas are read
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
	owner := peeringquota.ConsumerOfTwin(&ns)
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
	if req.Operation != admissionv1.Create || owner == "" || !peeringquota.Counts(sp) {
		return admission.Allowed("")
	}
	return v.charge(ctx, owner, sp)
}

// requestingConsumer is the consumer whose credential made the request, or
// "" for any other user.
func (v *ShadowPodValidator) requestingConsumer(ctx context.Context, username string) (ferryv1alpha1.ClusterID, error) {
	namespace, name, err := serviceaccount.SplitUsername(username)
	if err != nil || name != peering.ConsumerServiceAccount {
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

// charge reserves sp's requests in every quota of consumer, or denies.
func (v *ShadowPodValidator) charge(ctx context.Context, consumer ferryv1alpha1.ClusterID, sp *ferryv1alpha1.ShadowPod) admission.Response {
	var quotas ferryv1alpha1.PeeringQuotaList
	if err := v.Reader.List(ctx, &quotas, client.MatchingFields{peeringquota.ConsumerIndex: string(consumer)}); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("list PeeringQuotas of consumer %s: %w", consumer, err))
	}
	for i := range quotas.Items {
		if resp := v.reserve(ctx, &quotas.Items[i], sp); !resp.Allowed {
			return resp
		}
	}
	return admission.Allowed("")
}

func (v *ShadowPodValidator) reserve(ctx context.Context, q *ferryv1alpha1.PeeringQuota, sp *ferryv1alpha1.ShadowPod) admission.Response {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	key := client.ObjectKeyFromObject(q)
	for attempt := 1; ; attempt++ {
		exceeded, changed := peeringquota.Reserve(q, sp, now())
		if len(exceeded) > 0 {
			return admission.Denied(peeringquota.QuotaDenial(q.Spec.ConsumerClusterID, exceeded) + fmt.Sprintf(" (PeeringQuota %s)", key))
		}
		if !changed {
			return admission.Allowed("")
		}
		err := v.Writer.Status().Update(ctx, q)
		if err == nil {
			log.FromContext(ctx).V(1).Info("Reserved quota", "peeringQuota", key, "shadowPod", client.ObjectKeyFromObject(sp), "attempt", attempt)
			return admission.Allowed("")
		}
		if !apierrors.IsConflict(err) || attempt == maxQuotaAttempts {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reserve room in PeeringQuota %s: %w", key, err))
		}
		// Lost the race: someone charged the quota meanwhile. Start again
		// from what the API server holds now.
		q = &ferryv1alpha1.PeeringQuota{}
		if err := v.APIReader.Get(ctx, key, q); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read PeeringQuota %s: %w", key, err))
		}
	}
}
