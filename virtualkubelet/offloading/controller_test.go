package offloading

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// newTestController is a controller of node ferry-provider whose local
// cluster holds pod and whose provider answers every ShadowPod create with
// createErr.
func newTestController(t *testing.T, pod *corev1.Pod, createErr error) *controller {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	remote := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return createErr },
	}).Build()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	t.Cleanup(queue.ShutDown)
	return &controller{cfg: Config{NodeName: "ferry-provider", ProviderClusterID: "provider"}.withDefaults(),
		local: kubefake.NewClientset(pod), remote: remote, queue: queue, recorder: record.NewFakeRecorder(10), pending: newPendingClock()}
}

// TestCreateShadowPodFailsAPodRefusedForGood: one rule for refused pods. A
// provider refusing the ShadowPod as Invalid (ferry's Pod Security check,
// API validation) will refuse it whenever asked: the pod fails with
// OffloadingRefused, as one using hostNetwork does, and is not retried. A
// Forbidden one (an exceeded quota) and an unreachable provider may pass
// later: the pod stays Pending and the create is retried.
func TestCreateShadowPodFailsAPodRefusedForGood(t *testing.T) {
	spGroup := schema.GroupResource{Group: ferryv1alpha1.GroupVersion.Group, Resource: "shadowpods"}
	for _, tc := range []struct {
		name      string
		err       error
		phase     corev1.PodPhase
		reason    string
		retry     bool
		inMessage string
	}{
		{"pod security", apierrors.NewInvalid(ferryv1alpha1.GroupVersion.WithKind("ShadowPod").GroupKind(), "web-1", nil),
			corev1.PodFailed, ReasonOffloadingRefused, false, "refuses the pod as it is"},
		{"webhook denial as Invalid", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
			Message: `admission webhook "shadowpods.validate.ferry.io" denied the request: spec.template: consumer c's pods must meet the baseline level here: violates PodSecurity`}},
			corev1.PodFailed, ReasonOffloadingRefused, false, "violates PodSecurity"},
		{"exceeded quota", apierrors.NewForbidden(spGroup, "web-1", errors.New("PeeringQuota of consumer c exceeded")),
			corev1.PodPending, ReasonShadowPodRejected, true, "exceeded"},
		{"unreachable webhook", apierrors.NewInternalError(errors.New("failed calling webhook")),
			corev1.PodPending, ReasonOffloadRetrying, true, "retrying"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := boundPod()
			pod.Status.Phase = corev1.PodPending
			c := newTestController(t, pod, tc.err)
			sp, err := ShadowPodFor(pod, "consumer", "shop-twin", false, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = c.createShadowPod(t.Context(), pod, sp)
			if gotRetry := err != nil; gotRetry != tc.retry {
				t.Errorf("createShadowPod error %v: want a retry %v", err, tc.retry)
			}
			got, gerr := c.local.CoreV1().Pods(pod.Namespace).Get(t.Context(), pod.Name, metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			cond := offloadedCondition(got)
			switch {
			case got.Status.Phase != tc.phase:
				t.Errorf("phase %s, want %s", got.Status.Phase, tc.phase)
			case cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.inMessage):
				t.Errorf("Offloaded condition %+v: want False %s with %q", cond, tc.reason, tc.inMessage)
			case tc.phase == corev1.PodFailed && (got.Status.Reason != ReasonOffloadingRefused || !strings.Contains(got.Status.Message, tc.inMessage)):
				t.Errorf("pod reason %q message %q: want %s naming why", got.Status.Reason, got.Status.Message, ReasonOffloadingRefused)
			}
		})
	}
}
