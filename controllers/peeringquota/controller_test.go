package peeringquota

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// TestDropGone: a reservation whose ShadowPod went before any recount saw
// it gives its room back after unseenAfter, not after the TTL.
func TestDropGone(t *testing.T) {
	s := runtime.NewScheme()
	if err := ferryv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	sp := func(name, uid string, generation int64, deleting bool) client.Object {
		o := &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: "twin", Name: name, UID: types.UID(uid), Generation: generation}}
		if deleting {
			o.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			o.Finalizers = []string{"ferry.io/test"}
		}
		return o
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		sp("live", "u-live", 1, false), sp("reused", "u-other", 1, false), sp("deleting", "u-deleting", 2, true), sp("unstored", "u-unstored", 1, false),
	).Build()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	res := func(name, uid string, age time.Duration, generation int64) ferryv1alpha1.QuotaReservation {
		return ferryv1alpha1.QuotaReservation{Namespace: "twin", Name: name, UID: types.UID(uid), Time: metav1.NewTime(now.Add(-age)), Generation: generation}
	}
	r := &Reconciler{Client: c, APIReader: c}
	kept, next := r.dropGone(context.Background(), []ferryv1alpha1.QuotaReservation{
		res("gone", "u-gone", 3*time.Second, 1),
		res("young", "u-young", time.Second, 1),
		res("live", "u-live", 3*time.Second, 1),
		res("reused", "u-reused", 3*time.Second, 1),
		res("deleting", "u-deleting", 3*time.Second, 1),
		res("unstored", "u-unstored", 3*time.Second, 2),
	}, now)
	var names []string
	for _, k := range kept {
		names = append(names, k.Name)
	}
	if !slices.Equal(names, []string{"young", "live"}) {
		t.Errorf("kept %v, want [young live]", names)
	}
	if want := now.Add(unseenAfter - time.Second); !next.Equal(want) {
		t.Errorf("next check %v, want %v (the young one's)", next, want)
	}
}
