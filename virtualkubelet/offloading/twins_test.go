package offloading

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

func TestMain(m *testing.M) {
	// The fake provider client answers no streaming list (sendInitialEvents):
	// informers list, then watch, as they do against API servers without it.
	if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// watchCounter is a provider client that records every watch opened, as
// "<list type> <namespace>".
type watchCounter struct {
	client.WithWatch
	mu      sync.Mutex
	watches []string
}

func (w *watchCounter) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	w.mu.Lock()
	w.watches = append(w.watches, fmt.Sprintf("%T %s", list, o.Namespace))
	w.mu.Unlock()
	return w.WithWatch.Watch(ctx, list, opts...)
}

func (w *watchCounter) opened() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(slices.Values(w.watches))
}

// offloadedTo is a store of NamespaceOffloadings, one per local namespace,
// each Ready on cluster "provider" with twin namespace <namespace>-twin.
func offloadedTo(namespaces ...string) cache.Store {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, ns := range namespaces {
		_ = store.Add(&ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
			Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{
				{ClusterID: "provider", TwinNamespace: ns + "-twin", Phase: ferryv1alpha1.OffloadingReady}}},
		})
	}
	return store
}

func shadowPodIn(namespace, name string) *ferryv1alpha1.ShadowPod {
	return &ferryv1alpha1.ShadowPod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "consumer"}}}
}

// newTestTwins is a twins of consumer "consumer" on provider "provider"
// holding objs, with the watches it opens and the local pods it wakes.
func newTestTwins(t *testing.T, objs ...client.Object) (*twins, *watchCounter, func() []types.NamespacedName) {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	remote := &watchCounter{WithWatch: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()}
	var mu sync.Mutex
	var woken []types.NamespacedName
	ts := &twins{provider: "provider", consumer: "consumer", remote: remote,
		enqueue: func(k types.NamespacedName) {
			mu.Lock()
			defer mu.Unlock()
			woken = append(woken, k)
		},
		namespaceChanged: func(string) {}}
	return ts, remote, func() []types.NamespacedName {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(woken)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestTwinsClusterScopeOpensOneWatchPerKindHoweverManyNamespaces(t *testing.T) {
	ts, remote, _ := newTestTwins(t, shadowPodIn("shop-twin", "web-1"))
	ts.startShared(t.Context())
	want := []string{"*v1.PodList ", "*v1alpha1.ShadowPodList "}

	ts.refresh(t.Context(), offloadedTo("shop"))
	waitFor(t, "twin of shop synced", func() bool { return ts.forLocal("shop") != nil && ts.forLocal("shop").view().synced() })
	waitFor(t, "two watches", func() bool { return len(remote.opened()) == len(want) })
	if got := remote.opened(); !slices.Equal(got, want) {
		t.Fatalf("watches with one offloaded namespace = %q, want %q", got, want)
	}
	if ts.forLocal("shop").view().shadowPod("web-1") == nil {
		t.Errorf("ShadowPod shop-twin/web-1 not found through the twin of shop")
	}

	ts.refresh(t.Context(), offloadedTo("shop", "bar", "cafe"))
	for _, ns := range []string{"shop", "bar", "cafe"} {
		tw := ts.forLocal(ns)
		if tw == nil || tw.watch.Load() != ts.shared || !tw.view().synced() {
			t.Fatalf("twin of %s = %+v: want one on the shared, synced watch", ns, tw)
		}
	}
	if ts.forLocal("bar").view().shadowPod("web-1") != nil {
		t.Errorf("the twin of bar finds the ShadowPod of shop's twin namespace")
	}
	// Dropping a twin leaves the shared watch to the others.
	ts.refresh(t.Context(), offloadedTo("bar"))
	if ts.forLocal("shop") != nil || !ts.forLocal("bar").view().synced() {
		t.Fatalf("after shop's offloading went: shop %v, bar synced %v; want no twin of shop, bar still synced", ts.forLocal("shop"), ts.forLocal("bar").view().synced())
	}
	time.Sleep(100 * time.Millisecond) // room for a watch that should not open
	if got := remote.opened(); !slices.Equal(got, want) {
		t.Fatalf("watches with three, then one offloaded namespaces = %q, want still %q", got, want)
	}
}

func TestTwinsNamespaceScopeOpensWatchesPerTwinNamespace(t *testing.T) {
	ts, remote, _ := newTestTwins(t)
	ts.refresh(t.Context(), offloadedTo("shop", "bar"))
	waitFor(t, "four watches", func() bool { return len(remote.opened()) == 4 })
	want := []string{"*v1.PodList bar-twin", "*v1.PodList shop-twin", "*v1alpha1.ShadowPodList bar-twin", "*v1alpha1.ShadowPodList shop-twin"}
	if got := remote.opened(); !slices.Equal(got, want) {
		t.Fatalf("watches = %q, want %q", got, want)
	}
	if ts.forLocal("shop").watch.Load() == ts.forLocal("bar").watch.Load() {
		t.Errorf("two twin namespaces share a watch in the namespace scope")
	}
}

func TestTwinsClusterScopeWakesPodsOfANewTwinsCachedObjects(t *testing.T) {
	// Seen by the shared watch before shop was offloaded: its events found
	// no twin; the local pod must still be looked at (its ShadowPod may be
	// an orphan).
	ts, _, woken := newTestTwins(t, shadowPodIn("shop-twin", "gone"), shadowPodIn("elsewhere", "other"),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop-twin", Name: "running",
			Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: "consumer"}}})
	ts.startShared(t.Context())
	waitFor(t, "shared watch synced", ts.shared.synced)
	if got := woken(); len(got) != 0 {
		t.Fatalf("woke %v before any twin", got)
	}
	ts.refresh(t.Context(), offloadedTo("shop"))
	got := woken()
	for _, want := range []types.NamespacedName{{Namespace: "shop", Name: "gone"}, {Namespace: "shop", Name: "running"}} {
		if !slices.Contains(got, want) {
			t.Errorf("woken = %v, want %v among them", got, want)
		}
	}
	for _, k := range got {
		if k.Name == "other" {
			t.Errorf("woke %v for an object outside the twin namespaces", k)
		}
	}
}

func TestTrimRemoteKeepsWhatTheControllerReads(t *testing.T) {
	sp := shadowPodIn("shop-twin", "web-1")
	sp.Annotations = map[string]string{AnnotationTemplateHash: "h"}
	sp.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "ferry"}}
	sp.Spec = ferryv1alpha1.ShadowPodSpec{ConsumerClusterID: "consumer", Template: ferryv1alpha1.ShadowPodTemplate{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:v1"}}}}}
	sp.Status.Recreations = 2
	if _, err := trimRemote(sp); err != nil {
		t.Fatal(err)
	}
	if len(sp.Spec.Template.Spec.Containers) != 0 || sp.ManagedFields != nil {
		t.Errorf("ShadowPod kept its template or managed fields: %+v", sp)
	}
	if sp.Spec.ConsumerClusterID != "consumer" || sp.Annotations[AnnotationTemplateHash] != "h" || sp.Status.Recreations != 2 ||
		sp.Labels[ferryv1alpha1.LabelOriginCluster] != "consumer" {
		t.Errorf("ShadowPod lost what the controller reads: %+v", sp)
	}

	pod := runningRemote()
	pod.Labels = map[string]string{ferryv1alpha1.LabelOriginUID: "u"}
	pod.Spec.Containers = []corev1.Container{{Name: "web"}}
	want := pod.Status.DeepCopy()
	if _, err := trimRemote(pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) != 0 {
		t.Errorf("pod kept its spec")
	}
	if pod.Labels[ferryv1alpha1.LabelOriginUID] != "u" || pod.Status.PodIP != want.PodIP || len(pod.Status.ContainerStatuses) != 1 {
		t.Errorf("pod lost what the controller reads: %+v", pod)
	}
}

// refusedBy is a NamespaceOffloading of namespace whose twin namespace
// cluster "provider" refused with reason and message.
func refusedBy(namespace, twin, reason, message string) *ferryv1alpha1.NamespaceOffloading {
	return &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{
			ClusterID: "provider", TwinNamespace: twin, Phase: ferryv1alpha1.OffloadingFailed,
			Conditions: []metav1.Condition{{Type: ferryv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: message}}}}},
	}
}

func TestNotOffloadedHereNamesTheRealReason(t *testing.T) {
	deleting := refusedBy("shop", "shop", "NamespaceConflict", "taken")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pending := refusedBy("shop", "shop-home", "WaitingForProvider", "no answer yet")
	pending.Status.Clusters[0].Phase = ferryv1alpha1.OffloadingPending
	invalid := &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: "shop"},
		Status: ferryv1alpha1.NamespaceOffloadingStatus{Conditions: []metav1.Condition{{Type: ferryv1alpha1.NamespaceOffloadingReady,
			Status: metav1.ConditionFalse, Reason: "InvalidClusterSelector", Message: "spec.clusterSelector.nodeSelectorTerms[0]: bad"}}},
	}
	elsewhere := refusedBy("shop", "shop-home", "Ready", "")
	elsewhere.Status.Clusters[0].ClusterID = "other"
	elsewhere.Status.Conditions = []metav1.Condition{
		{Type: ferryv1alpha1.NamespaceOffloadingClustersSelected, Status: metav1.ConditionTrue, Reason: "ClustersSelected", Message: "other"},
		{Type: ferryv1alpha1.NamespaceOffloadingReady, Status: metav1.ConditionFalse, Reason: "ClustersNotReady", Message: "waiting for other"}}
	for name, tc := range map[string]struct {
		nso  *ferryv1alpha1.NamespaceOffloading
		want string
	}{
		"the provider refused the twin namespace's name": {refusedBy("shop", "shop", "NamespaceConflict", "namespace shop already exists in this cluster"),
			"NamespaceOffloading shop/offloading: cluster provider refused twin namespace shop: namespace shop already exists in this cluster (NamespaceConflict)"},
		"the provider has not answered yet": {pending,
			"NamespaceOffloading shop/offloading: twin namespace shop-home in cluster provider is Pending: no answer yet (WaitingForProvider)"},
		"the NamespaceOffloading itself is invalid": {invalid,
			"NamespaceOffloading shop/offloading does not offload to cluster provider: spec.clusterSelector.nodeSelectorTerms[0]: bad (InvalidClusterSelector)"},
		"another cluster is selected": {elsewhere, "NamespaceOffloading shop/offloading does not select cluster provider (spec.clusterSelector)"},
		"being deleted":               {deleting, "NamespaceOffloading shop/offloading is being deleted: namespace shop is being unoffloaded"},
	} {
		if got := notOffloadedHere(tc.nso, "provider"); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, tc.want)
		}
	}
}

func TestTwinsTellPodsWhyTheirNamespaceIsNotOffloadedAndWakeThemWhenThatChanges(t *testing.T) {
	ts, _, _ := newTestTwins(t)
	var changed []string
	ts.namespaceChanged = func(ns string) { changed = append(changed, ns) }
	if got := ts.whyNotOffloaded("shop"); !strings.Contains(got, "offload it with a NamespaceOffloading selecting that cluster") {
		t.Errorf("without a NamespaceOffloading: %q, want the hint to create one", got)
	}

	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = store.Add(refusedBy("shop", "shop", "NamespaceConflict", "namespace shop already exists in this cluster"))
	ts.refresh(t.Context(), store)
	got := ts.whyNotOffloaded("shop")
	if !strings.Contains(got, "NamespaceConflict") || strings.Contains(got, "offload it with a NamespaceOffloading") {
		t.Errorf("refused by the provider: %q, want the refusal (NamespaceConflict), not the hint to create a NamespaceOffloading", got)
	}
	if !slices.Equal(changed, []string{"shop"}) {
		t.Errorf("namespaces woken = %q, want [shop]: its pods are told the refusal", changed)
	}

	changed = nil
	ts.refresh(t.Context(), store)
	if len(changed) != 0 {
		t.Errorf("namespaces woken with nothing changed = %q, want none", changed)
	}

	ts.refresh(t.Context(), offloadedTo("shop"))
	if ts.forLocal("shop") == nil || !slices.Contains(changed, "shop") {
		t.Errorf("once the twin is Ready: twin %v, woken %q; want a twin and shop woken", ts.forLocal("shop"), changed)
	}
}

// TestTwinsWakePodsWhenThePreferenceChanges: a changed placement
// preference wakes the namespace's pods (their pod-deletion-cost changes
// with it), an unchanged one does not, and a pod narrowing its strategy is
// out of the preference.
func TestTwinsWakePodsWhenThePreferenceChanges(t *testing.T) {
	ts, _, _ := newTestTwins(t)
	var changed []string
	ts.namespaceChanged = func(ns string) { changed = append(changed, ns) }
	store := offloadedTo("shop")
	ts.refresh(t.Context(), store)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	if got := ts.preference(pod); got != ferryv1alpha1.PlacementPreferenceNone {
		t.Errorf("no preference: %q, want None", got)
	}

	obj, _, _ := store.GetByKey("shop/" + ferryv1alpha1.NamespaceOffloadingName)
	nso := obj.(*ferryv1alpha1.NamespaceOffloading).DeepCopy()
	nso.Spec.PodOffloadingStrategy, nso.Spec.PlacementPreference = ferryv1alpha1.PodOffloadingLocalAndRemote, ferryv1alpha1.PlacementPreferenceLocalFirst
	_ = store.Update(nso)
	changed = nil
	ts.refresh(t.Context(), store)
	if !slices.Equal(changed, []string{"shop"}) {
		t.Errorf("namespaces woken = %q, want [shop]", changed)
	}
	if got := ts.preference(pod); got != ferryv1alpha1.PlacementPreferenceLocalFirst {
		t.Errorf("preference %q, want LocalFirst", got)
	}
	narrowed := pod.DeepCopy()
	narrowed.Annotations = map[string]string{placement.AnnotationPodOffloadingStrategy: "Remote"}
	if got := ts.preference(narrowed); got != ferryv1alpha1.PlacementPreferenceNone {
		t.Errorf("a pod narrowed to Remote: %q, want None", got)
	}

	changed = nil
	ts.refresh(t.Context(), store)
	if len(changed) != 0 {
		t.Errorf("namespaces woken with nothing changed = %q, want none", changed)
	}
}
