package datagravity

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/plugins/internal/plugintest"
	"github.com/ferry-io/ferry/plugins/virtualnodes"
)

// listingPreScore is PreScore as it was before the GravityIndex: it lists
// the namespace's claims and reads each gravity claim's volume. It is the
// reference the index is checked and measured against.
func listingPreScore(pl *Plugin, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if len(nodes) < 2 {
		return fwk.NewStatus(fwk.Skip)
	}
	pvcs, err := pl.pvcs.PersistentVolumeClaims(pod.Namespace).List(labels.Everything())
	if err != nil {
		return fwk.AsStatus(err)
	}
	s := &scoreState{bytes: map[ferryv1alpha1.ClusterID]int64{}}
	var most int64
	for _, pvc := range pvcs {
		if on, _ := placement.DataGravity(pvc.Annotations); !on {
			continue
		}
		pv, err := pl.boundVolume(pvc)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if pv == nil {
			continue
		}
		c := placement.VolumeCluster(pv)
		// The volume's capacity, else the claim's reported capacity,
		// else its request.
		var size resource.Quantity
		switch {
		case hasStorage(pv.Spec.Capacity):
			size = pv.Spec.Capacity[corev1.ResourceStorage]
		case hasStorage(pvc.Status.Capacity):
			size = pvc.Status.Capacity[corev1.ResourceStorage]
		default:
			size = pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		}
		s.bytes[c] += size.Value()
		most = max(most, s.bytes[c])
	}
	if most == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	s.divisor = max(most, pl.args.FullPullBytes.Value())
	cs.Write(scoreKey, s)
	return nil
}

func hasStorage(l corev1.ResourceList) bool {
	_, ok := l[corev1.ResourceStorage]
	return ok
}

// world is a set of claims and volumes kept both in listers' stores (for
// the reference) and in a GravityIndex fed through its event handlers.
type world struct {
	claims, volumes   cache.Indexer
	index             *GravityIndex
	onClaim, onVolume cache.ResourceEventHandler
	pl                *Plugin
}

func newWorld(args Args) *world {
	w := &world{
		claims:  cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		volumes: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		index:   newGravityIndex(),
	}
	w.onClaim, w.onVolume = w.index.claimHandler(), w.index.volumeHandler()
	w.pl = NewWith(args, corelisters.NewPersistentVolumeClaimLister(w.claims), corelisters.NewPersistentVolumeLister(w.volumes),
		virtualnodes.NewStatic(), w.index)
	return w
}

// set stores obj and tells handler, as an informer would: Add for a new
// object, Update otherwise.
func set(t testing.TB, store cache.Indexer, handler cache.ResourceEventHandler, obj metav1.Object) {
	t.Helper()
	old, exists, err := store.Get(obj)
	if err == nil {
		err = store.Update(obj)
	}
	if err != nil {
		t.Error(err) // not Fatal: called from goroutines too
		return
	}
	if exists {
		handler.OnUpdate(old, obj)
	} else {
		handler.OnAdd(obj, false)
	}
}

// remove deletes the object stored under key and tells handler, as a
// tombstone when tombstone is set (the informer missed the deletion).
func remove(t testing.TB, store cache.Indexer, handler cache.ResourceEventHandler, key string, tombstone bool) {
	t.Helper()
	old, exists, err := store.GetByKey(key)
	if err != nil || !exists {
		return
	}
	if err := store.Delete(old); err != nil {
		t.Fatal(err)
	}
	if tombstone {
		handler.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
		return
	}
	handler.OnDelete(old)
}

// randomClaim is a claim with every field gravity reads drawn at random:
// the annotation (absent, true, false, invalid), the volume it names (maybe
// none), its reported capacity and its request (each maybe absent).
func randomClaim(r *rand.Rand, namespaces []string, names, volumes int) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespaces[r.IntN(len(namespaces))], Name: fmt.Sprintf("claim-%d", r.IntN(names)),
	}}
	if a := []string{"", "true", "false", "yes"}[r.IntN(4)]; a != "" {
		pvc.Annotations = map[string]string{placement.AnnotationDataGravity: a}
	}
	if n := r.IntN(volumes + 1); n < volumes {
		pvc.Spec.VolumeName = fmt.Sprintf("pv-%d", n)
	}
	if r.IntN(2) == 0 {
		pvc.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: randomSize(r)}
	}
	if r.IntN(3) != 0 {
		pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: randomSize(r)}
	}
	return pvc
}

// randomVolume is a volume of a random cluster (this one, a or b), with a
// random capacity or none.
func randomVolume(r *rand.Rand, volumes int) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", r.IntN(volumes))}}
	if c := []string{"", "a", "b"}[r.IntN(3)]; c != "" {
		pv.Labels = map[string]string{ferryv1alpha1.LabelClusterID: c}
	}
	if r.IntN(4) != 0 {
		pv.Spec.Capacity = corev1.ResourceList{corev1.ResourceStorage: randomSize(r)}
	}
	return pv
}

func randomSize(r *rand.Rand) resource.Quantity {
	return *resource.NewQuantity([]int64{0, 1, 1 << 20, 1 << 30, 5 << 30, 12 << 30, 1 << 40}[r.IntN(7)], resource.BinarySI)
}

// checkPreScore compares, for namespace, PreScore over the index with the
// listing PreScore over the stores: same status, same bytes per cluster
// (clusters holding only empty volumes included), same divisor.
func (w *world) checkPreScore(t *testing.T, namespace, after string) {
	t.Helper()
	pod := plugintest.Pod(namespace, "p")
	nodes := []fwk.NodeInfo{plugintest.Info(testNodes[0]), plugintest.Info(testNodes[1])}
	got, want := framework.NewCycleState(), framework.NewCycleState()
	gotSt, wantSt := w.pl.PreScore(context.Background(), got, pod, nodes), listingPreScore(w.pl, want, pod, nodes)
	if gotSt.Code() != wantSt.Code() {
		t.Fatalf("after %s: namespace %s: PreScore %v, the listing %v", after, namespace, gotSt, wantSt)
	}
	if !wantSt.IsSuccess() {
		return
	}
	g, _ := got.Read(scoreKey)
	l, _ := want.Read(scoreKey)
	gs, ls := g.(*scoreState), l.(*scoreState)
	if !maps.Equal(gs.bytes, ls.bytes) || gs.divisor != ls.divisor {
		t.Fatalf("after %s: namespace %s: bytes %v divisor %d, the listing %v divisor %d", after, namespace, gs.bytes, gs.divisor, ls.bytes, ls.divisor)
	}
}

// The index gives PreScore the same result as listing the namespace's
// claims, after any sequence of claim and volume events: annotation
// toggled, claims bound before or after their volume exists, volumes
// resized or moved to another cluster, either deleted (also as tombstones),
// several claims naming one volume, resyncs.
func TestGravityIndexEqualsTheListingAfterRandomEvents(t *testing.T) {
	namespaces := []string{"ns", "other"}
	const claims, volumes, sequences, steps = 8, 5, 300, 150
	args := DefaultArgs()
	args.FullPullBytes = resource.MustParse("2Gi")
	for seq := range uint64(sequences) {
		r := rand.New(rand.NewPCG(seq, 20))
		w := newWorld(args)
		for step := range steps {
			var what string
			switch op := r.IntN(10); {
			case op < 4:
				pvc := randomClaim(r, namespaces, claims, volumes)
				set(t, w.claims, w.onClaim, pvc)
				what = fmt.Sprintf("claim %s/%s set (gravity %q, volume %q)", pvc.Namespace, pvc.Name, pvc.Annotations[placement.AnnotationDataGravity], pvc.Spec.VolumeName)
			case op < 5:
				key := fmt.Sprintf("%s/claim-%d", namespaces[r.IntN(len(namespaces))], r.IntN(claims))
				tombstone := r.IntN(2) == 0
				remove(t, w.claims, w.onClaim, key, tombstone)
				what = fmt.Sprintf("claim %s deleted (tombstone %v)", key, tombstone)
			case op < 8:
				pv := randomVolume(r, volumes)
				set(t, w.volumes, w.onVolume, pv)
				what = fmt.Sprintf("volume %s set (cluster %q, capacity %v)", pv.Name, placement.VolumeCluster(pv), pv.Spec.Capacity.Storage())
			case op < 9:
				key := fmt.Sprintf("pv-%d", r.IntN(volumes))
				tombstone := r.IntN(2) == 0
				remove(t, w.volumes, w.onVolume, key, tombstone)
				what = fmt.Sprintf("volume %s deleted (tombstone %v)", key, tombstone)
			default:
				for _, obj := range w.claims.List() {
					w.onClaim.OnUpdate(obj, obj)
				}
				for _, obj := range w.volumes.List() {
					w.onVolume.OnUpdate(obj, obj)
				}
				what = "resync"
			}
			for _, ns := range namespaces {
				w.checkPreScore(t, ns, fmt.Sprintf("sequence %d step %d: %s", seq, step, what))
			}
		}
	}
}

// PreScore and Score may run while events arrive: the state PreScore
// writes keeps the bytes it read (the race detector checks the sharing).
func TestScoresReadWhileEventsArrive(t *testing.T) {
	w := newWorld(DefaultArgs())
	// Data no random event touches: PreScore always scores.
	set(t, w.volumes, w.onVolume, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "anchor", Labels: map[string]string{ferryv1alpha1.LabelClusterID: "a"}},
		Spec:       corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	})
	set(t, w.claims, w.onClaim, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "anchor", Annotations: map[string]string{placement.AnnotationDataGravity: "true"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "anchor"},
	})
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			set(t, w.volumes, w.onVolume, randomVolume(r, 3))
			set(t, w.claims, w.onClaim, randomClaim(r, []string{"ns"}, 4, 3))
		}
	}()
	defer func() { close(stop); <-stopped }()
	pod := plugintest.Pod("ns", "p")
	var infos []fwk.NodeInfo
	for _, n := range testNodes {
		infos = append(infos, plugintest.Info(n))
	}
	for range 2000 {
		cs := framework.NewCycleState()
		if st := w.pl.PreScore(context.Background(), cs, pod, infos); !st.IsSuccess() {
			t.Fatalf("PreScore %v, want gravity data in cluster a at least", st)
		}
		for _, ni := range infos {
			if s, st := w.pl.Score(context.Background(), cs, pod, ni); !st.IsSuccess() || s < 0 || s > fwk.MaxScore {
				t.Fatalf("Score %s: %d %v", ni.Node().Name, s, st)
			}
		}
	}
}

// Fed by real informers, the index follows the API: a claim's data counts
// once its volume exists, moves with the volume, and goes with the claim.
func TestGravityIndexFollowsTheInformers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gi := resource.MustParse("3Gi")
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", Annotations: map[string]string{placement.AnnotationDataGravity: "true"}},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"},
	}
	client := fake.NewClientset(pvc)
	factory := informers.NewSharedInformerFactory(client, 0)
	index, err := NewGravityIndex(factory.Core().V1().PersistentVolumeClaims().Informer(), factory.Core().V1().PersistentVolumes().Informer())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), index.HasSynced) {
		t.Fatal("the index never synced")
	}
	if v := index.view("ns"); v != nil {
		t.Fatalf("a claim whose volume does not exist: %v, want no gravity data", v.bytes)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-data", Labels: map[string]string{ferryv1alpha1.LabelClusterID: "a"}},
		Spec:       corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: gi}},
	}
	volumes := client.CoreV1().PersistentVolumes()
	if _, err := volumes.Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForView(ctx, t, index, "volume created", map[ferryv1alpha1.ClusterID]int64{"a": gi.Value()})
	pv.Labels = nil
	if _, err := volumes.Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForView(ctx, t, index, "volume moved to this cluster", map[ferryv1alpha1.ClusterID]int64{placement.LocalCluster: gi.Value()})
	if err := client.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForView(ctx, t, index, "claim deleted", nil)
}

func waitForView(ctx context.Context, t *testing.T, index *GravityIndex, after string, want map[ferryv1alpha1.ClusterID]int64) {
	t.Helper()
	var got map[ferryv1alpha1.ClusterID]int64
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		got = nil
		if v := index.view("ns"); v != nil {
			got = v.bytes
		}
		return maps.Equal(got, want), nil
	})
	if err != nil {
		t.Fatalf("after %s: gravity data %v, want %v", after, got, want)
	}
}

// BenchmarkPreScore measures PreScore listing the namespace's claims (as
// before the GravityIndex) and reading the index, in a namespace of 8000
// bound gravity claims, each with its own volume in one of 4 clusters, and
// in one of 2000 bound claims without the annotation (the offload-data
// namespace of scheduler_perf's FerryPlacement, whose pods PreScore skips).
func BenchmarkPreScore(b *testing.B) {
	w := newWorld(DefaultArgs())
	for _, ns := range []struct {
		name    string
		claims  int
		gravity string
	}{{"gravity", 8000, "true"}, {"plain", 2000, ""}} {
		for i := range ns.claims {
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", ns.name, i), Labels: map[string]string{ferryv1alpha1.LabelClusterID: fmt.Sprintf("cluster-%d", i%4)}},
				Spec:       corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}
			set(b, w.volumes, w.onVolume, pv)
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: pv.Name}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name}}
			if ns.gravity != "" {
				pvc.Annotations = map[string]string{placement.AnnotationDataGravity: ns.gravity}
			}
			set(b, w.claims, w.onClaim, pvc)
		}
	}
	nodes := []fwk.NodeInfo{plugintest.Info(testNodes[0]), plugintest.Info(testNodes[1])}
	for _, bc := range []struct {
		name, namespace string
		wantSkip        bool
	}{{"8000GravityClaims", "gravity", false}, {"2000PlainClaims", "plain", true}} {
		pod := plugintest.Pod(bc.namespace, "p")
		for _, impl := range []struct {
			name     string
			preScore func(*Plugin, fwk.CycleState, *corev1.Pod, []fwk.NodeInfo) *fwk.Status
		}{
			{"listing", listingPreScore},
			{"index", func(pl *Plugin, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
				return pl.PreScore(context.Background(), cs, pod, nodes)
			}},
		} {
			b.Run(bc.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if st := impl.preScore(w.pl, framework.NewCycleState(), pod, nodes); st.IsSkip() != bc.wantSkip || !st.IsSuccess() && !st.IsSkip() {
						b.Fatalf("PreScore %v", st)
					}
				}
			})
		}
	}
}
