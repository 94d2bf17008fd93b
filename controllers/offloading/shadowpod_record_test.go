package offloading

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// reconcileOnce runs one reconcile of sp with r.
func reconcileOnce(t *testing.T, r *ShadowPodReconciler, sp *ferryv1alpha1.ShadowPod) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)}); err != nil {
		t.Fatal(err)
	}
}

func getShadowPod(t *testing.T, c client.Client, sp *ferryv1alpha1.ShadowPod) *ferryv1alpha1.ShadowPod {
	t.Helper()
	var got ferryv1alpha1.ShadowPod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// deletePod deletes sp's real pod, as someone on the provider does.
func deletePod(t *testing.T, c client.Client, sp *ferryv1alpha1.ShadowPod) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &pod); err != nil {
		t.Fatalf("no real pod: %v", err)
	}
	if err := c.Delete(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// A first pod costs no ShadowPod write, yet a controller manager restarted
// afterwards counts the pod's deletion as a recreation: its informer's first
// list shows the pod before any reconcile sees it gone.
func TestFirstPodCostsNoStatusWriteAndARestartStillCountsItsDeletion(t *testing.T) {
	sp := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	before := getShadowPod(t, c, sp)

	first := &ShadowPodReconciler{Client: c, pods: newPodRecord()}
	reconcileOnce(t, first, sp)
	after := getShadowPod(t, c, sp)
	if after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("creating the first pod wrote the ShadowPod (status %+v)", after.Status)
	}
	reconcileOnce(t, first, sp) // the pod exists: still nothing to write
	if got := getShadowPod(t, c, sp); got.ResourceVersion != before.ResourceVersion {
		t.Fatalf("a reconcile of a running pod wrote the ShadowPod (status %+v)", got.Status)
	}

	// A new process: its record starts empty and its pod informer lists the
	// pod, which is then deleted before the ShadowPod's reconcile.
	restarted := &ShadowPodReconciler{Client: c, pods: newPodRecord()}
	var listed corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &listed); err != nil {
		t.Fatal(err)
	}
	restarted.pods.saw(&listed)
	deletePod(t, c, sp)
	reconcileOnce(t, restarted, sp)
	got := getShadowPod(t, c, sp)
	if got.Status.Recreations != 1 || got.Status.PodName != sp.Name {
		t.Fatalf("after a restart, the deleted pod's replacement counted %d recreations (podName %q), want 1 (%q)", got.Status.Recreations, got.Status.PodName, sp.Name)
	}

	// From now on the status is the record: a process that never saw a
	// pod still counts the next deletion.
	deletePod(t, c, sp)
	reconcileOnce(t, &ShadowPodReconciler{Client: c, pods: newPodRecord()}, sp)
	if got := getShadowPod(t, c, sp); got.Status.Recreations != 2 {
		t.Fatalf("recreations %d, want 2", got.Status.Recreations)
	}
}

// A pod lost while no controller manager ran is counted when the
// consumer's virtual kubelet recorded it (AnnotationPodLost); a ShadowPod
// with no record of any pod gets its first one, not counted.
func TestPodLostWhileTheControllerWasDown(t *testing.T) {
	lost := fenceTestShadowPod()
	lost.Name, lost.UID = "lost", "lost-uid"
	lost.Annotations = map[string]string{ferryv1alpha1.AnnotationPodLost: "true"}
	fresh := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(lost, fresh).WithStatusSubresource(lost, fresh).Build()
	r := &ShadowPodReconciler{Client: c, pods: newPodRecord()}
	reconcileOnce(t, r, lost)
	reconcileOnce(t, r, fresh)
	if got := getShadowPod(t, c, lost); got.Status.Recreations != 1 {
		t.Errorf("a pod the virtual kubelet saw lost: %d recreations, want 1", got.Status.Recreations)
	}
	if got := getShadowPod(t, c, fresh); got.Status.Recreations != 0 {
		t.Errorf("a first pod: %d recreations, want 0", got.Status.Recreations)
	}
}

// A status written for another reason while a pod exists (here, the pod
// ended) carries the record of the pod along.
func TestStatusWrittenAnywayRecordsThePod(t *testing.T) {
	sp := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp).WithStatusSubresource(sp, &corev1.Pod{}).Build()
	r := &ShadowPodReconciler{Client: c, pods: newPodRecord()}
	reconcileOnce(t, r, sp)
	var pod corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodFailed
	if err := c.Status().Update(context.Background(), &pod); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, r, sp)
	got := getShadowPod(t, c, sp)
	if got.Status.Phase != corev1.PodFailed || got.Status.PodName != sp.Name || got.Status.ObservedGeneration != sp.Generation {
		t.Fatalf("status %+v, want phase Failed, podName %s, observedGeneration %d", got.Status, sp.Name, sp.Generation)
	}
}

func TestPodRecordMarksOnlyShadowPodsPods(t *testing.T) {
	rec := newPodRecord()
	owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: ferryv1alpha1.GroupVersion.String(), Kind: "ShadowPod", Name: "a", UID: "sp-a", Controller: new(true)}}}}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid", Controller: new(true)}}}}
	notController := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: ferryv1alpha1.GroupVersion.String(), Kind: "ShadowPod", Name: "c", UID: "sp-c"}}}}
	rec.saw(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: owned})
	rec.saw(other)
	rec.saw(notController)
	if !rec.had("sp-a") {
		t.Error("a pod its ShadowPod controls (seen as a tombstone) is not recorded")
	}
	if rec.had("rs-uid") || rec.had("sp-c") {
		t.Error("a pod no ShadowPod controls is recorded")
	}
	rec.forget(&ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{UID: "sp-a"}})
	if rec.had("sp-a") {
		t.Error("a released ShadowPod stays recorded")
	}
}

// Until the record has taken in the pod informer's first list (its handler
// gets the events on its own, after the cache says it is synced), a
// ShadowPod whose pod is missing is looked at again, not given a pod that
// may wrongly count as a first one.
func TestNoPodCreatedBeforeTheRecordHasTheFirstList(t *testing.T) {
	sp := fenceTestShadowPod()
	c := fake.NewClientBuilder().WithScheme(ferryscheme.Scheme()).WithObjects(sp).WithStatusSubresource(sp).Build()
	rec := newPodRecord()
	synced := false
	rec.synced = func() bool { return synced }
	r := &ShadowPodReconciler{Client: c, pods: rec}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &pod); err == nil {
		t.Fatal("a pod was created before the record had the first list")
	}
	if res.RequeueAfter != recordSyncRetry {
		t.Fatalf("requeued after %s, want %s", res.RequeueAfter, recordSyncRetry)
	}
	synced = true
	reconcileOnce(t, r, sp)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), &pod); err != nil {
		t.Fatalf("no pod once the record is synced: %v", err)
	}
}
