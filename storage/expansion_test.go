package storage

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func storageOf(l corev1.ResourceList) string {
	q := l[corev1.ResourceStorage]
	return q.String()
}

func hasResizeCondition(c *corev1.PersistentVolumeClaim) bool {
	for _, x := range c.Status.Conditions {
		if resizeConditions[x.Type] {
			return true
		}
	}
	return false
}

func TestExpansionStatuses(t *testing.T) {
	user := claim("2Gi")
	user.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		Conditions: []corev1.PersistentVolumeClaimCondition{{Type: "Other", Status: corev1.ConditionTrue}}}
	backing := claim("1Gi")
	if want, have, ok := expansionToForward(user, backing); !ok || want.String() != "2Gi" || have.String() != "1Gi" {
		t.Errorf("expansionToForward: %s %s %v, want 2Gi over 1Gi", want.String(), have.String(), ok)
	}
	if _, _, ok := expansionToForward(backing, user); ok {
		t.Error("a smaller request is forwarded")
	}
	if !expansionInFlight(user, resource.MustParse("1Gi")) || expansionInFlight(user, resource.MustParse("2Gi")) || expansionInFlight(nil, resource.Quantity{}) {
		t.Error("expansionInFlight: wrong")
	}

	resizing := markResizing(user, resource.MustParse("2Gi"), metav1.Now())
	if resizing.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress ||
		storageOf(resizing.Status.AllocatedResources) != "2Gi" || !hasResizeCondition(resizing) || len(resizing.Status.Conditions) != 2 {
		t.Errorf("markResizing: %+v", resizing.Status)
	}
	if user.Status.AllocatedResourceStatuses != nil {
		t.Error("markResizing changed its argument")
	}
	if resizeDone(resizing, resource.MustParse("1Gi")) || resizeDone(resizing, resource.Quantity{}) {
		t.Error("resizeDone before the data holds the request")
	}
	if !resizeDone(resizing, resource.MustParse("2Gi")) {
		t.Error("resizeDone: not done at the request")
	}
	done := markResized(resizing, resource.MustParse("2Gi"))
	if storageOf(done.Status.Capacity) != "2Gi" || done.Status.AllocatedResourceStatuses != nil || hasResizeCondition(done) || len(done.Status.Conditions) != 1 {
		t.Errorf("markResized: %+v", done.Status)
	}
	if resizeDone(done, resource.MustParse("2Gi")) {
		t.Error("resizeDone again once done")
	}
	// A provider that rounds up: more than asked is shown.
	if !resizeDone(user, resource.MustParse("5Gi")) || storageOf(markResized(user, resource.MustParse("5Gi")).Status.Capacity) != "5Gi" {
		t.Error("a larger capacity is not shown")
	}
}

// The whole round of a claim held by a real claim: forwarded, marked
// resizing, then, once the real claim shows the new capacity, the volume
// and the claim show it with no resize status or condition left.
func TestRealVolumeExpanderForwardsAndReports(t *testing.T) {
	ctx := context.Background()
	user, real, pv := realHeld(t)
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(user, real, pv).
		WithStatusSubresource(&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &RealVolumeExpander{Client: c, Namespace: DefaultNamespace, Recorder: recorder}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
			t.Fatal(err)
		}
	}
	reconcile()
	got := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(real), got); err != nil || storageOf(got.Spec.Resources.Requests) != "3Gi" {
		t.Fatalf("real claim request %s (%v), want the user's 3Gi", storageOf(got.Spec.Resources.Requests), err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(user), got); err != nil || got.Status.AllocatedResourceStatuses[corev1.ResourceStorage] != corev1.PersistentVolumeClaimControllerResizeInProgress {
		t.Fatalf("user's claim not marked resizing: %+v %v", got.Status, err)
	}
	if e := <-recorder.Events; !strings.Contains(e, EventExpansionForwarded) || !strings.Contains(e, "from 1Gi to 3Gi") {
		t.Errorf("event %q", e)
	}

	// The real class's resizer grows the real claim.
	if err := c.Get(ctx, client.ObjectKeyFromObject(real), got); err != nil {
		t.Fatal(err)
	}
	got.Status.Capacity[corev1.ResourceStorage] = resource.MustParse("3Gi")
	if err := c.Status().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	reconcile()
	if err := c.Get(ctx, client.ObjectKeyFromObject(user), got); err != nil {
		t.Fatal(err)
	}
	if storageOf(got.Status.Capacity) != "3Gi" || got.Status.AllocatedResourceStatuses != nil || hasResizeCondition(got) {
		t.Errorf("user's claim after the real one grew: %+v", got.Status)
	}
	grown := &corev1.PersistentVolume{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pv), grown); err != nil || storageOf(grown.Spec.Capacity) != "3Gi" {
		t.Errorf("volume capacity %s (%v), want 3Gi", storageOf(grown.Spec.Capacity), err)
	}
}

// A real class that does not expand: the API server refuses; the user's
// claim gets an event and nothing else.
func TestRealVolumeExpanderRefusal(t *testing.T) {
	ctx := context.Background()
	user, real, pv := realHeld(t)
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(user, real, pv).
		WithStatusSubresource(&corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetNamespace() == DefaultNamespace {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "persistentvolumeclaims"}, obj.GetName(),
					errString("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"))
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &RealVolumeExpander{Client: c, Namespace: DefaultNamespace, Recorder: recorder}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pv)}); err != nil {
		t.Fatal(err)
	}
	if e := <-recorder.Events; !strings.Contains(e, EventExpansionRefused) || !strings.Contains(e, "must support resize") {
		t.Errorf("event %q", e)
	}
	got := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(user), got); err != nil || got.Status.AllocatedResourceStatuses != nil || hasResizeCondition(got) || storageOf(got.Status.Capacity) != "1Gi" {
		t.Errorf("user's claim after a refusal: %+v %v", got.Status, err)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// realHeld is a user's claim asking for 3Gi, bound at 1Gi to a volume
// standing for a real claim of 1Gi.
func realHeld(t *testing.T) (user, real *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	t.Helper()
	user = claim("3Gi")
	user.Spec.VolumeName = "pvc-uid-1"
	user.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}
	real = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: "pvc-uid-1", Labels: originLabels("home", user)},
		Spec:   claimSpecFor(claim("1Gi"), "fast"),
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}
	pv = &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-uid-1", Annotations: map[string]string{AnnotationBackingClaim: DefaultNamespace + "/pvc-uid-1"}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			ClaimRef: &corev1.ObjectReference{Namespace: user.Namespace, Name: user.Name, UID: user.UID}},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound}}
	return user, real, pv
}
