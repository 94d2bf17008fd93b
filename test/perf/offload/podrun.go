package offload

import (
	"context"
	"fmt"
	"github.com/ferry-io/ferry/test/perf/stats"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

const (
	// settle is how long requests are still counted after the last pod is
	// Running: the writes a pod causes right after (statuses, events,
	// grants) belong to it.
	settle = 3 * time.Second
	// stallTimeout fails a run in which no pod reached any stage for so long.
	stallTimeout = 2 * time.Minute
	// progressPeriod is how often a run prints where its pods are.
	progressPeriod = 2 * time.Second
)

// stage is a step on a pod's way to Running, as the harness's watches see it.
type stage string

const (
	created       stage = "created"        // just before its create call
	bound         stage = "bound"          // the scheduler bound it (spec.nodeName)
	shadowed      stage = "shadowpod"      // its ShadowPod exists in the twin namespace
	remoteCreated stage = "remote-created" // the provider's real pod exists
	remoteBound   stage = "remote-bound"   // the provider's scheduler bound it
	remoteRunning stage = "remote-running" // Running and Ready in the provider
	running       stage = "running"        // Running and Ready where it was created
)

// podRun creates pods in one cluster and times each until it is Running.
type podRun struct {
	// name is the run's, e.g. "offload-burst": in progress lines, and the
	// prefix of its pods' names (the pods of earlier runs stay, their
	// watches ignore them).
	name      string
	cluster   *testbed.Cluster // where the pods are created
	namespace string
	spec      corev1.PodSpec
	// shape says how many pods arrive, and how.
	shape Shape
	// counted are the clusters whose API requests are counted.
	counted []*testbed.Cluster
	// twin, for offloaded pods, is the provider and twinNamespace the
	// namespace where their ShadowPods and real pods are watched.
	twin          *testbed.Cluster
	twinNamespace string
	// claims, when set, creates the pods as StatefulSets with claims.
	claims *claimWorkload
}

// runResult is what one run saw.
type runResult struct {
	name     string
	pods     int
	stages   []stage
	timeline *timeline
	// requests served by each counted cluster during the run, by kind.
	requests map[string]requestCounts
	// idleRequests is how many of them the clusters would have served
	// without the run, at the rate measured just before it.
	idleRequests float64
}

// measure performs the run: it starts the watches, counts requests before,
// creates the pods at the run's concurrency, waits until every pod is
// Running and Ready (printing progress), lets the cluster settle and counts
// requests again.
func (r podRun) measure(ctx context.Context, say func(string, ...any)) (*runResult, error) {
	res := &runResult{name: r.name, pods: r.shape.Pods, timeline: newTimeline(), requests: map[string]requestCounts{}}
	watchCtx, stopWatches := context.WithCancel(ctx)
	var watches sync.WaitGroup
	defer watches.Wait()
	defer stopWatches()

	kube, err := harnessClient(r.cluster)
	if err != nil {
		return nil, err
	}
	prefix := r.name + "-"
	synced := []cache.InformerSynced{watchPods(watchCtx, &watches, kube, r.namespace, prefix, res.timeline, "", bound, running)}
	res.stages = []stage{created, bound, running}
	if r.twin != nil {
		remote, err := harnessClient(r.twin)
		if err != nil {
			return nil, err
		}
		shadows, err := watchShadowPods(watchCtx, &watches, r.twin.Config, r.twinNamespace, prefix, res.timeline)
		if err != nil {
			return nil, err
		}
		synced = append(synced, shadows, watchPods(watchCtx, &watches, remote, r.twinNamespace, prefix, res.timeline, remoteCreated, remoteBound, remoteRunning))
		res.stages = []stage{created, bound, shadowed, remoteCreated, remoteBound, remoteRunning, running}
		if r.claims != nil {
			synced = append(synced,
				watchClaims(watchCtx, &watches, remote, r.twinNamespace, prefix, res.timeline, remoteClaim, remoteClaimSelected, remoteClaimHanded, remoteClaimBound),
				watchVolumes(watchCtx, &watches, remote, r.twinNamespace, prefix, res.timeline, remoteVolume))
		}
	}
	if r.claims != nil {
		synced = append(synced,
			watchClaims(watchCtx, &watches, kube, r.namespace, prefix, res.timeline, "", claimSelected, claimHanded, claimBound),
			watchVolumes(watchCtx, &watches, kube, r.namespace, prefix, res.timeline, claimVolume))
		res.stages = claimStages(r.twin != nil)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("%s run: start watches: %w", r.name, ctx.Err())
	}

	idle, err := r.idleRequests(ctx)
	if err != nil {
		return nil, err
	}
	before := map[string]requestCounts{}
	for _, c := range r.counted {
		if before[c.Name], err = scrapeRequests(ctx, c); err != nil {
			return nil, err
		}
	}
	countedFrom := time.Now()
	createErr := make(chan error, 1)
	go func() {
		if r.claims != nil {
			createErr <- r.createSets(ctx, kube, res.timeline)
			return
		}
		createErr <- r.create(ctx, kube, res.timeline)
	}()
	if err := r.waitRunning(ctx, res, createErr, say); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	for _, c := range r.counted {
		after, err := scrapeRequests(ctx, c)
		if err != nil {
			return nil, err
		}
		res.requests[c.Name] = after.minus(before[c.Name])
	}
	res.idleRequests = idle * time.Since(countedFrom).Seconds()
	return res, nil
}

// idleWindow is how long the requests of the idle clusters are counted
// before a run: the leases, probes and resyncs that go on without pods.
const idleWindow = 5 * time.Second

// idleRequests is how many requests per second the counted clusters serve
// with nothing happening.
func (r podRun) idleRequests(ctx context.Context) (float64, error) {
	var n int64
	for _, phase := range []int64{-1, 1} {
		if phase == 1 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(idleWindow):
			}
		}
		for _, c := range r.counted {
			counts, err := scrapeRequests(ctx, c)
			if err != nil {
				return 0, err
			}
			n += phase * counts.total()
		}
	}
	return float64(n) / idleWindow.Seconds(), nil
}

// create creates the run's pods, concurrency at a time, marking each
// created just before its call.
func (r podRun) create(ctx context.Context, kube kubernetes.Interface, tl *timeline) error {
	return r.createEach(ctx, r.shape.Pods, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s-%05d", r.name, i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: map[string]string{"app": "bench"}}, Spec: *r.spec.DeepCopy()}
		tl.mark(name, created, time.Now())
		if _, err := kube.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s/%s in %s: %w", r.namespace, name, r.cluster.Name, err)
		}
		return nil
	})
}

// createEach calls create for 0..n-1, the shape's concurrency at a time and,
// with a rate, none before it is due; the first error stops the rest.
func (r podRun) createEach(ctx context.Context, n int, create func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan int)
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range r.shape.Concurrency {
		wg.Go(func() {
			for i := range items {
				if err := create(ctx, i); err != nil {
					once.Do(func() {
						firstErr = err
						cancel()
					})
					return
				}
			}
		})
	}
	begin := time.Now()
feed:
	for i := range n {
		if wait := time.Until(r.shape.startOf(begin, i)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				break feed
			}
		}
		select {
		case items <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(items)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// waitRunning waits until every pod is Running, printing how far the pods
// got every progressPeriod; it fails when creating fails or nothing moves
// for stallTimeout.
func (r podRun) waitRunning(ctx context.Context, res *runResult, createErr <-chan error, say func(string, ...any)) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastProgress, lastChange, lastCounts := time.Now(), time.Now(), ""
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s run: %w (pods: %s)", r.name, ctx.Err(), res.counts())
		case err := <-createErr:
			if err != nil {
				return fmt.Errorf("%s run: %w", r.name, err)
			}
		case <-tick.C:
		}
		if res.timeline.count(running) == r.shape.Pods {
			say("%s: %s", r.name, res.counts())
			return nil
		}
		if counts := res.counts(); counts != lastCounts {
			lastCounts, lastChange = counts, time.Now()
		} else if time.Since(lastChange) > stallTimeout {
			return fmt.Errorf("%s run: no pod moved for %s (pods: %s)", r.name, stallTimeout, counts)
		}
		if time.Since(lastProgress) >= progressPeriod {
			say("%s: %s", r.name, lastCounts)
			lastProgress = time.Now()
		}
	}
}

// counts says how many pods reached each stage.
func (res *runResult) counts() string {
	parts := make([]string, len(res.stages))
	for i, s := range res.stages {
		parts[i] = fmt.Sprintf("%d %s", res.timeline.count(s), s)
	}
	return strings.Join(parts, ", ")
}

// stats are the run's figures for the RESULT line.
func (res *runResult) stats() RunStats {
	ttr := res.timeline.between(created, running)
	first, _ := res.timeline.window(created)
	_, last := res.timeline.window(running)
	var requests int64
	byCluster := map[string]float64{}
	for name, counts := range res.requests {
		requests += counts.total()
		byCluster[name] = float64(counts.total()) / float64(res.pods)
	}
	st := RunStats{
		P50:               stats.Percentile(ttr, 50),
		P99:               stats.Percentile(ttr, 99),
		Throughput:        float64(res.pods) / last.Sub(first).Seconds(),
		RequestsPerPod:    float64(requests) / float64(res.pods),
		NetRequestsPerPod: max(0, float64(requests)-res.idleRequests) / float64(res.pods),
		RequestsPerPodBy:  byCluster,
	}
	if slices.Contains(res.stages, shadowed) {
		added := res.timeline.sumBetween(ferryStages...)
		st.FerryAddedP50, st.FerryAddedP99 = stats.Percentile(added, 50), stats.Percentile(added, 99)
	}
	return st
}

// ferryStages are the steps of an offloaded pod's way that are ferry's own
// work: the virtual kubelet making the ShadowPod, the provider's controller
// making the real pod, and the virtual kubelet carrying Running back. The
// rest (scheduling on each side, the provider's kubelet) a direct pod has
// too.
var ferryStages = [][2]stage{{bound, shadowed}, {shadowed, remoteCreated}, {remoteRunning, running}}

// report prints where the time went, stage by stage (when pods reached it,
// and how long after the previous stage), and which requests were served.
func (res *runResult) report(say func(string, ...any)) {
	start, _ := res.timeline.window(created)
	for i, s := range res.stages {
		first, last := res.timeline.window(s)
		line := fmt.Sprintf("%s  %-15s reached %.2fs..%.2fs", res.name, s, first.Sub(start).Seconds(), last.Sub(start).Seconds())
		if i > 0 {
			d := res.timeline.between(res.stages[i-1], s)
			line += fmt.Sprintf(", after %s: p50 %s p99 %s", res.stages[i-1], ms(stats.Percentile(d, 50)), ms(stats.Percentile(d, 99)))
		}
		say("%s", line)
	}
	if line := res.shares(); line != "" {
		say("%s  share of the time from created to %s, by step (mean over the pods that reached every stage): %s", res.name, running, line)
	}
	names := make([]string, 0, len(res.requests))
	for name := range res.requests {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		counts := res.requests[name]
		say("%s  requests served by %s: %d (%.1f per pod); most: %s", res.name, name, counts.total(),
			float64(counts.total())/float64(res.pods), counts.top(8))
	}
	say("%s  of which the idle clusters' own (leases, probes, resyncs; at the rate measured for %s before the run): %.0f", res.name, idleWindow, res.idleRequests)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", millis(d)) }

// harnessClient is a clientset for the harness itself, with a rate limit
// high enough that it never waits on itself.
func harnessClient(c *testbed.Cluster) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", c.Name, err)
	}
	return kube, nil
}

// watchPods marks, for each pod of namespace named with prefix, the first
// time a watch sees it (seen, unless empty), bound to a node, and Running
// and Ready.
func watchPods(ctx context.Context, wg *sync.WaitGroup, kube kubernetes.Interface, namespace, prefix string, tl *timeline, seen, boundStage, runningStage stage) cache.InformerSynced {
	lw := cache.NewListWatchFromClient(kube.CoreV1().RESTClient(), "pods", namespace, fields.Everything())
	return runInformer(ctx, wg, lw, &corev1.Pod{}, func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || !strings.HasPrefix(pod.Name, prefix) {
			return
		}
		now := time.Now()
		if seen != "" {
			tl.mark(pod.Name, seen, now)
		}
		if pod.Spec.NodeName != "" {
			tl.mark(pod.Name, boundStage, now)
		}
		if runningAndReady(pod) {
			tl.mark(pod.Name, runningStage, now)
		}
	})
}

// watchShadowPods marks the first time a watch sees each ShadowPod of
// namespace named with prefix (by name, which is its pod's).
func watchShadowPods(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, namespace, prefix string, tl *timeline) (cache.InformerSynced, error) {
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	shadowPods := md.Resource(ferryv1alpha1.GroupVersion.WithResource("shadowpods")).Namespace(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return shadowPods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return shadowPods.Watch(ctx, o)
		},
	}
	return runInformer(ctx, wg, lw, &metav1.PartialObjectMetadata{}, func(obj any) {
		if sp, ok := obj.(*metav1.PartialObjectMetadata); ok && strings.HasPrefix(sp.Name, prefix) {
			tl.mark(sp.Name, shadowed, time.Now())
		}
	}), nil
}

// runInformer calls observe with every object added or updated until ctx ends.
func runInformer(ctx context.Context, wg *sync.WaitGroup, lw cache.ListerWatcher, obj runtime.Object, observe func(any)) cache.InformerSynced {
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, o any) { observe(o) },
		},
	})
	wg.Go(func() { informer.RunWithContext(ctx) })
	return informer.HasSynced
}

func runningAndReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// timeline records when each pod first reached each stage.
type timeline struct {
	mu      sync.Mutex
	at      map[string]map[stage]time.Time
	reached map[stage]int
}

func newTimeline() *timeline {
	return &timeline{at: map[string]map[stage]time.Time{}, reached: map[stage]int{}}
}

// mark records that pod reached s at t, unless it did before.
func (tl *timeline) mark(pod string, s stage, t time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	stages := tl.at[pod]
	if stages == nil {
		stages = map[stage]time.Time{}
		tl.at[pod] = stages
	}
	if _, ok := stages[s]; ok {
		return
	}
	stages[s] = t
	tl.reached[s]++
}

// count is how many pods reached s.
func (tl *timeline) count(s stage) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.reached[s]
}

// between is, for each pod that reached both stages, the time from one to
// the other.
func (tl *timeline) between(from, to stage) []time.Duration {
	return tl.sumBetween([2]stage{from, to})
}

// sumBetween is, for each pod that reached every stage of steps, the sum of
// the times between each step's two stages.
func (tl *timeline) sumBetween(steps ...[2]stage) []time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []time.Duration
pods:
	for _, stages := range tl.at {
		var sum time.Duration
		for _, step := range steps {
			a, okA := stages[step[0]]
			b, okB := stages[step[1]]
			if !okA || !okB {
				continue pods
			}
			sum += b.Sub(a)
		}
		out = append(out, sum)
	}
	return out
}

// window is the first and the last time a pod reached s.
func (tl *timeline) window(s stage) (first, last time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, stages := range tl.at {
		t, ok := stages[s]
		if !ok {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}
