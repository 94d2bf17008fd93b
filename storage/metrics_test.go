package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestFailureReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("claim a/b in cluster p: %w", because(ReasonNotOffloaded, errors.New("namespace a is not offloaded"))), ReasonNotOffloaded},
		{fmt.Errorf("claim a/b: %w", ErrNotPeered), ReasonNotPeered},
		{fmt.Errorf("the provider refused claim: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, "b", errors.New("exceeded quota"))), ReasonRefused},
		{errors.New("connection refused"), ReasonAPIError},
	} {
		if got := failureReason(tc.err); got != tc.want {
			t.Errorf("failureReason(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// A claim provisioned after failed attempts is observed once, from its
// first attempt; waiting for a real volume is no failure; a claim handed
// back to the scheduler starts over.
func TestAttemptsObserveFromTheFirstAttempt(t *testing.T) {
	provisioningDuration.Reset()
	provisioningFailures.Reset()
	var a attempts
	t0 := time.Now().Add(-30 * time.Second)
	a.observe("u1", "p1", t0, controller.ProvisioningNoChange, because(ReasonTwinNotReady, errors.New("twin not ready")))
	a.observe("u1", "p1", t0.Add(10*time.Second), controller.ProvisioningInBackground, because(reasonWaiting, errors.New("waiting")))
	a.observe("u1", "p1", t0.Add(20*time.Second), controller.ProvisioningFinished, nil)
	if got := testutil.ToFloat64(provisioningFailures.WithLabelValues("p1", ReasonTwinNotReady)); got != 1 {
		t.Errorf("TwinNotReady failures = %v, want 1", got)
	}
	if got := testutil.ToFloat64(provisioningFailures.WithLabelValues("p1", reasonWaiting)); got != 0 {
		t.Errorf("waiting counted as %v failures", got)
	}
	want := `
# HELP ferry_storage_provisioning_duration_seconds Time from the first attempt to provision a claim of the virtual class to its volume, by the cluster holding the data.
# TYPE ferry_storage_provisioning_duration_seconds histogram
`
	got, err := testutil.CollectAndFormat(provisioningDuration, expfmt.TypeTextPlain, "ferry_storage_provisioning_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), strings.TrimPrefix(want, "\n")) || !strings.Contains(string(got), `ferry_storage_provisioning_duration_seconds_count{cluster="p1"} 1`) {
		t.Fatalf("histogram:\n%s", got)
	}
	// 30 s from the first attempt: in the bucket up to 51.2 s, not in the one up to 25.6 s.
	if !strings.Contains(string(got), `le="25.6"} 0`) || !strings.Contains(string(got), `le="51.2"} 1`) {
		t.Errorf("the duration is not counted from the first attempt:\n%s", got)
	}
	if len(a.first) != 0 {
		t.Errorf("attempts kept %v after the claim was provisioned", a.first)
	}
	a.observe("u2", "p1", t0, controller.ProvisioningReschedule, because(ReasonClassNotOffered, errors.New("no class")))
	if len(a.first) != 0 {
		t.Errorf("a claim handed back to the scheduler is remembered: %v", a.first)
	}
}

func TestClaimsCollector(t *testing.T) {
	now := time.Now()
	ts := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago).Truncate(time.Second)) }
	pvc := func(name, cluster string, phase corev1.PersistentVolumeClaimPhase, class string, created metav1.Time) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: created},
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
		}
		if cluster != "" {
			c.Labels = map[string]string{ferryv1alpha1.LabelClusterID: cluster}
		}
		return c
	}
	pod := func(name string, created metav1.Time, claims ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: created}}
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		return p
	}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "ferry"}, Provisioner: ferryv1alpha1.ProvisionerVirtual},
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "example.com/disk"},
		pvc("a", "eu-1", corev1.ClaimBound, "ferry", ts(time.Hour)),
		pvc("b", "eu-1", corev1.ClaimBound, "ferry", ts(time.Hour)),
		pvc("c", "home", corev1.ClaimBound, "ferry", ts(time.Hour)),
		pvc("waited", "", corev1.ClaimPending, "ferry", ts(time.Hour)),
		pvc("unused", "", corev1.ClaimPending, "ferry", ts(time.Hour)),
		pvc("other-class", "", corev1.ClaimPending, "standard", ts(time.Hour)),
		pod("db-0", ts(10*time.Minute), "waited", "a"),
		pod("db-1", ts(20*time.Minute), "waited"),
	).Build()
	want := fmt.Sprintf(`
# HELP ferry_storage_claim_pending_since_timestamp_seconds For each Pending claim of ferry's virtual storage class that a pod waits for: since when (the later of the claim's and its oldest waiting pod's creation), in Unix seconds.
# TYPE ferry_storage_claim_pending_since_timestamp_seconds gauge
ferry_storage_claim_pending_since_timestamp_seconds{claim="waited",namespace="shop"} %d
# HELP ferry_storage_claims Claims of ferry's virtual storage class, by the cluster holding their data (label ferry.io/cluster-id; empty before provisioning) and phase.
# TYPE ferry_storage_claims gauge
ferry_storage_claims{cluster="",phase="Pending"} 2
ferry_storage_claims{cluster="eu-1",phase="Bound"} 2
ferry_storage_claims{cluster="home",phase="Bound"} 1
# HELP ferry_storage_claims_scrape_error 1 when the claims could not be read from the cache at the last scrape.
# TYPE ferry_storage_claims_scrape_error gauge
ferry_storage_claims_scrape_error 0
`, ts(20*time.Minute).Unix())
	if err := testutil.CollectAndCompare(&ClaimsCollector{Reader: c}, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
