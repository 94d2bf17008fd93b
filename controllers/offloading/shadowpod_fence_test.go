package offloading

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

type stubFences map[ferryv1alpha1.ClusterID]bool

func (s stubFences) Fenced(_ context.Context, c ferryv1alpha1.ClusterID) (bool, error) {
	return s[c], nil
}
func (s stubFences) Wake() <-chan event.GenericEvent               { return nil }
func (s stubFences) RecentlyUnfenced(ferryv1alpha1.ClusterID) bool { return true }

// deletedReader sees every ShadowPod deleted, as the API server does when
// the cache has not caught up yet.
type deletedReader struct{ client.Reader }

func (deletedReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if sp, ok := obj.(*ferryv1alpha1.ShadowPod); ok {
		sp.Name, sp.Namespace = key.Name, key.Namespace
		sp.DeletionTimestamp = &metav1.Time{Time: metav1.Now().Time}
		return nil
	}
	return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
}

// Right after an unfence, a ShadowPod the consumer deleted before renewing
// (which the cache still shows alive) gets no pod.
func TestShadowPodDeletedBeforeTheUnfenceGetsNoPod(t *testing.T) {
	ctx := context.Background()
	sp := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	r := &ShadowPodReconciler{Client: c, APIReader: deletedReader{}, Fences: stubFences{}}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod was created for a ShadowPod the API server shows deleted (err %v)", err)
	}
}

func fenceTestShadowPod() *ferryv1alpha1.ShadowPod {
	return &ferryv1alpha1.ShadowPod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop-home", UID: "sp-uid", Generation: 1,
			Finalizers: []string{ferryv1alpha1.ShadowPodFinalizer},
			Labels:     map[string]string{ferryv1alpha1.LabelOriginCluster: "home"}},
		Spec: ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "home", Template: ferryv1alpha1.ShadowPodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
		}},
	}
}

// A fenced consumer's pod is deleted with the short grace period and not
// created again; once unfenced, it is.
func TestShadowPodOfFencedConsumer(t *testing.T) {
	ctx := context.Background()
	sp := fenceTestShadowPod()
	pod, err := PodFor(sp, ferryscheme.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp, pod).WithStatusSubresource(sp).Build()
	fences := stubFences{"home": true}
	r := &ShadowPodReconciler{Client: c, Fences: fences}
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Name}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the fenced consumer's pod is still there (err %v)", err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the fenced consumer's pod was created again (err %v)", err)
	}
	var got ferryv1alpha1.ShadowPod
	if err := c.Get(ctx, key, &got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, ferryv1alpha1.ShadowPodCreated); cond == nil || cond.Reason != ReasonFenced || cond.Status != metav1.ConditionFalse {
		t.Fatalf("PodCreated condition %+v, want False/%s", cond, ReasonFenced)
	}

	fences["home"] = false
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, &corev1.Pod{}); err != nil {
		t.Fatalf("unfenced, the pod is not back: %v", err)
	}
}

// Another consumer's fence leaves this one's pods alone.
func TestShadowPodOfOtherConsumerNotFenced(t *testing.T) {
	ctx := context.Background()
	sp := fenceTestShadowPod()
	pod, err := PodFor(sp, ferryscheme.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp, pod).WithStatusSubresource(sp).Build()
	r := &ShadowPodReconciler{Client: c, Fences: stubFences{"other": true}}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &corev1.Pod{}); err != nil {
		t.Fatalf("a pod of a consumer not fenced was deleted: %v", err)
	}
}

// A ShadowPod whose pod was deleted, and which the API server shows
// deleted while the cache does not yet, gets no new pod: the consumer's
// virtual kubelet deletes the pod of a ShadowPod it deletes, and
// recreating it from the stale cache loops (create, delete) until the
// cache catches up.
func TestPodDeletedWithItsShadowPodIsNotRecreatedFromAStaleCache(t *testing.T) {
	ctx := context.Background()
	sp := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	r := &ShadowPodReconciler{Client: c, pods: newPodRecord()}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &pod); err != nil {
		t.Fatalf("no first pod: %v", err)
	}
	if err := c.Delete(ctx, &pod); err != nil {
		t.Fatal(err)
	}
	r.APIReader = deletedReader{}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sp), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the pod of a ShadowPod the API server shows deleted was recreated (err %v)", err)
	}
	// A live ShadowPod still gets its pod back, counted.
	r.APIReader = nil
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
	if got := getShadowPod(t, c, sp); got.Status.Recreations != 1 {
		t.Fatalf("recreations %d, want 1", got.Status.Recreations)
	}
}
