package fencing

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
)

func consumerFC(selfFencing *bool) *ferryv1alpha1.ForeignCluster {
	return &ferryv1alpha1.ForeignCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "home", Generation: 1},
		Spec: ferryv1alpha1.ForeignClusterSpec{ClusterID: "home", Role: ferryv1alpha1.RoleConsumer,
			Fencing: ferryv1alpha1.Fencing{SelfFencing: selfFencing}},
	}
}

func fencerBed(t *testing.T, fc *ferryv1alpha1.ForeignCluster, objs ...client.Object) (client.Client, *Fencer) {
	t.Helper()
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: peering.TenantNamespaceOf(fc)}}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(append(objs, fc, tenant)...).WithStatusSubresource(fc).Build()
	return c, &Fencer{Client: c, Fences: NewFences(c)}
}

func reconcileFC(t *testing.T, r *Fencer) ctrl.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "home"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func renew(t *testing.T, c client.Client, tenant string, at time.Time, seconds int32) {
	t.Helper()
	var l coordinationv1.Lease
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: tenant, Name: ferryv1alpha1.ConsumerLeaseName}, &l); err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = ptr.To(metav1.NewMicroTime(at)), &seconds
	if err := c.Update(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
}

func fencedCondition(t *testing.T, c client.Client) *metav1.Condition {
	t.Helper()
	var fc ferryv1alpha1.ForeignCluster
	if err := c.Get(context.Background(), types.NamespacedName{Name: "home"}, &fc); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(fc.Status.Conditions, ferryv1alpha1.ForeignClusterFenced)
}

// The Fencer makes the Lease, fences when it expires (by the renewTime,
// right after a start) and unfences when it is renewed; the ShadowPods of
// the consumer are woken on each change.
func TestFencerFencesAndUnfences(t *testing.T) {
	ctx := context.Background()
	fc := consumerFC(nil)
	tenant := peering.TenantNamespaceOf(fc)
	sp := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop-home", Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "home"}}}
	c, r := fencerBed(t, fc, sp)

	reconcileFC(t, r)
	var l coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: ferryv1alpha1.ConsumerLeaseName}, &l); err != nil {
		t.Fatalf("the consumer's Lease was not made: %v", err)
	}
	if l.Annotations[ferryv1alpha1.AnnotationSelfFencing] != "true" || l.Labels[ferryv1alpha1.LabelOriginCluster] != "home" {
		t.Fatalf("Lease metadata %v %v", l.Labels, l.Annotations)
	}
	if cond := fencedCondition(t, c); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonNotArmed {
		t.Fatalf("unarmed: condition %+v", cond)
	}

	// A renewal older than T by this clock fences at once.
	renew(t, c, tenant, time.Now().Add(-time.Minute), 8)
	reconcileFC(t, r)
	if cond := fencedCondition(t, c); cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonLeaseExpired {
		t.Fatalf("expired: condition %+v", cond)
	}
	if f, _ := r.Fences.Fenced(ctx, "home"); !f {
		t.Fatal("Fences does not say the consumer is fenced")
	}
	select {
	case e := <-r.Fences.Wake():
		if e.Object.GetName() != "web-0" {
			t.Fatalf("woke %s", e.Object.GetName())
		}
	default:
		t.Fatal("the consumer's ShadowPods were not woken")
	}

	// A fresh renewal unfences and says when to look again.
	renew(t, c, tenant, time.Now(), 8)
	res := reconcileFC(t, r)
	if cond := fencedCondition(t, c); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonLeaseRenewed {
		t.Fatalf("renewed: condition %+v", cond)
	}
	if f, _ := r.Fences.Fenced(ctx, "home"); f {
		t.Fatal("still fenced after a renewal")
	}
	if !r.Fences.RecentlyUnfenced("home") {
		t.Fatal("the unfence is not remembered")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 8*time.Second+time.Second {
		t.Fatalf("requeue after %v, want just over the time left of T", res.RequeueAfter)
	}
}

// selfFencing: false never fences and says so in the Lease.
func TestFencerSelfFencingOff(t *testing.T) {
	ctx := context.Background()
	fc := consumerFC(ptr.To(false))
	tenant := peering.TenantNamespaceOf(fc)
	c, r := fencerBed(t, fc)
	reconcileFC(t, r)
	renew(t, c, tenant, time.Now().Add(-time.Hour), 8)
	reconcileFC(t, r)
	if cond := fencedCondition(t, c); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != ReasonSelfFencingOff {
		t.Fatalf("condition %+v", cond)
	}
	var l coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: tenant, Name: ferryv1alpha1.ConsumerLeaseName}, &l); err != nil {
		t.Fatal(err)
	}
	if l.Annotations[ferryv1alpha1.AnnotationSelfFencing] != "false" {
		t.Fatalf("annotation %q, want false", l.Annotations[ferryv1alpha1.AnnotationSelfFencing])
	}
}

// Before the Fencer has decided (just after a start), Fences reads the
// Lease's renewTime: the ShadowPod controller never recreates a pod the
// consumer's expired Lease forbids.
func TestFencesBeforeTheFencerDecides(t *testing.T) {
	ctx := context.Background()
	lease := func(at time.Time, selfFencing string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.ConsumerLeaseName, Namespace: "ferry-tenant-home",
				Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "home"}, Annotations: map[string]string{ferryv1alpha1.AnnotationSelfFencing: selfFencing}},
			Spec: coordinationv1.LeaseSpec{RenewTime: ptr.To(metav1.NewMicroTime(at)), LeaseDurationSeconds: ptr.To[int32](10)},
		}
	}
	for _, tc := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"expired", lease(time.Now().Add(-time.Minute), "true"), true},
		{"fresh", lease(time.Now(), "true"), false},
		{"expired, self-fencing off", lease(time.Now().Add(-time.Minute), "false"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(tc.lease).Build()
			got, err := NewFences(c).Fenced(ctx, "home")
			if err != nil || got != tc.want {
				t.Fatalf("Fenced = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
