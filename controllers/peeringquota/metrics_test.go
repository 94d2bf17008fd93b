package peeringquota

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestUsageRatioCountsReservationsAndGoesWithTheQuota(t *testing.T) {
	q := &ferryv1alpha1.PeeringQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "q"},
		Spec: ferryv1alpha1.PeeringQuotaSpec{ConsumerClusterID: "c1", Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("0")}},
		Status: ferryv1alpha1.PeeringQuotaStatus{
			Used:         corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			Reservations: []ferryv1alpha1.QuotaReservation{{Name: "sp", UID: "u-sp", Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}},
		},
	}
	recordUsage("tenant", "q", q)
	if got := testutil.ToFloat64(usedRatio.WithLabelValues("tenant", "q", "c1", "cpu")); got != 0.75 {
		t.Errorf("cpu ratio %v, want 0.75 (1 used + 500m reserved of 2)", got)
	}
	if got := testutil.ToFloat64(usedRatio.WithLabelValues("tenant", "q", "c1", "pods")); got != 1 {
		t.Errorf("pods ratio %v, want 1 (a zero limit is spent)", got)
	}
	recordUsage("tenant", "q", nil)
	if n := testutil.CollectAndCount(usedRatio); n != 0 {
		t.Errorf("%d series left after the quota was deleted", n)
	}
}
