package quota

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func cpuShadow(uid, cpu string) *ferryv1alpha1.ShadowPod {
	sp := shadow(corev1.PodRunning, corev1.PodSpec{Containers: []corev1.Container{ctr("c", rl("cpu", cpu, "memory", "1Gi"))}})
	sp.UID = types.UID(uid)
	sp.Name = uid
	return &sp
}

func TestReserveIsExactAndIdempotent(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	q := &ferryv1alpha1.PeeringQuota{Spec: ferryv1alpha1.PeeringQuotaSpec{Limits: rl("cpu", "1")}}

	if exceeded, changed := Reserve(q, cpuShadow("a", "600m"), now); len(exceeded) > 0 || !changed {
		t.Fatalf("first 600m: exceeded %v changed %v", exceeded, changed)
	}
	if exceeded, changed := Reserve(q, cpuShadow("a", "600m"), now); len(exceeded) > 0 || changed {
		t.Errorf("the same ShadowPod again: exceeded %v changed %v, want a no-op", exceeded, changed)
	}
	if exceeded, _ := Reserve(q, cpuShadow("b", "600m"), now); len(exceeded) != 1 {
		t.Errorf("second 600m against 1 CPU: exceeded %v, want a refusal", exceeded)
	}
	if exceeded, changed := Reserve(q, cpuShadow("c", "400m"), now); len(exceeded) > 0 || !changed {
		t.Errorf("400m filling the quota to the millicore: exceeded %v", exceeded)
	}
	if exceeded, _ := Reserve(q, cpuShadow("d", "1m"), now); len(exceeded) != 1 {
		t.Errorf("1m over a full quota admitted")
	}
	if got := q.Status.Reservations[0].Requests; len(got) != 1 {
		t.Errorf("reservation charges unlimited resources too: %v", got)
	}
	if full := Full(q); len(full) != 1 || full[0] != corev1.ResourceCPU {
		t.Errorf("Full = %v, want [cpu]", full)
	}
}

func TestRecountFoldsSeenReservationsAndExpiresTheRest(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	q := &ferryv1alpha1.PeeringQuota{Spec: ferryv1alpha1.PeeringQuotaSpec{Limits: rl("cpu", "2")}}
	for _, r := range []struct {
		uid string
		at  time.Time
	}{{"seen", now.Add(-time.Second)}, {"pending", now.Add(-10 * time.Second)}, {"stale", now.Add(-ReservationTTL)}} {
		q.Status.Reservations = append(q.Status.Reservations, ferryv1alpha1.QuotaReservation{
			UID: types.UID(r.uid), Requests: rl("cpu", "500m"), Time: metav1.NewTime(r.at)})
	}
	done := cpuShadow("done", "700m")
	done.Status.Phase = corev1.PodSucceeded
	status, next := Recount(q, []ferryv1alpha1.ShadowPod{*cpuShadow("seen", "500m"), *cpuShadow("old", "250m"), *done}, now)

	if used := status.Used[corev1.ResourceCPU]; used.Cmp(resource.MustParse("750m")) != 0 {
		t.Errorf("used %s, want 750m (seen + old; the Succeeded one does not count)", used.String())
	}
	if len(status.Reservations) != 1 || status.Reservations[0].UID != "pending" {
		t.Errorf("reservations %v, want only the pending one", status.Reservations)
	}
	if want := now.Add(-10 * time.Second).Add(ReservationTTL); !next.Equal(want) {
		t.Errorf("next expiry %v, want %v", next, want)
	}
	q.Status = status
	if charged := Charged(q, ""); charged.Cpu().Cmp(resource.MustParse("1250m")) != 0 {
		t.Errorf("charged %s, want 1250m", charged.Cpu())
	}
}

// TestRecountKeepsAnUpdateReservationUntilItsGenerationIsSeen: an update's
// reservation is folded in only once used counts the updated ShadowPod.
func TestRecountKeepsAnUpdateReservationUntilItsGenerationIsSeen(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	q := &ferryv1alpha1.PeeringQuota{Spec: ferryv1alpha1.PeeringQuotaSpec{Limits: rl("cpu", "2")}}
	q.Status.Reservations = []ferryv1alpha1.QuotaReservation{{UID: "web", Requests: rl("cpu", "300m"), Time: metav1.NewTime(now), Generation: 2}}
	web := cpuShadow("web", "500m")
	web.Generation = 1
	if st, _ := Recount(q, []ferryv1alpha1.ShadowPod{*web}, now); len(st.Reservations) != 1 {
		t.Errorf("reservation dropped at generation 1: %v", st.Reservations)
	}
	web.Generation = 2
	if st, _ := Recount(q, []ferryv1alpha1.ShadowPod{*web}, now); len(st.Reservations) != 0 {
		t.Errorf("reservation kept once generation 2 is counted: %v", st.Reservations)
	}
}
