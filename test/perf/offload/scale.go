package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// ScaleOptions are a scale run's: many pods over many offloaded namespaces
// and several providers, for what grows with them (time to Running, the
// virtual kubelets' and controller managers' memory and CPU, requests,
// watches, etcd) and what goes on at rest.
type ScaleOptions struct {
	// Pods created over all Namespaces, round robin.
	Pods int
	// Namespaces offloaded, each to every provider.
	Namespaces int
	// Providers peered with the consumer, each with its virtual kubelet.
	Providers int
	// Concurrency of the create calls.
	Concurrency int
	// ClusterRead binds each provider's ferry-reflection-reader ClusterRole
	// to the consumer, as a provider that trusts it would: the virtual
	// kubelets (remote scope auto) then watch the provider cluster-wide.
	ClusterRead bool
	// Direct first creates the same pods directly in the providers (as
	// many in each as it will hold offloaded), the baseline of time_ratio.
	Direct bool
	// Steady is the window at rest after all pods are Running: the writes
	// of every program (from the API servers' audit logs) and the memory
	// growth of ferry's processes over it. 0 skips it.
	Steady time.Duration
	// Restarts runs the restarts (runRestartScale) instead of the figures.
	Restarts bool
	// RepoRoot is ferry's source tree.
	RepoRoot string
	// Out receives the progress lines and the RESULT line.
	Out io.Writer
}

func (o ScaleOptions) validate() error {
	switch {
	case o.Pods < 1:
		return fmt.Errorf("-pods %d: must be at least 1", o.Pods)
	case o.Namespaces < 1:
		return fmt.Errorf("-namespaces %d: must be at least 1", o.Namespaces)
	case o.Providers < 1:
		return fmt.Errorf("-providers %d: must be at least 1", o.Providers)
	case o.Concurrency < 1:
		return fmt.Errorf("-concurrency %d: must be at least 1", o.Concurrency)
	case o.Steady < 0:
		return fmt.Errorf("-steady %s: must not be negative", o.Steady)
	}
	if _, err := os.Stat(filepath.Join(o.RepoRoot, "go.mod")); err != nil {
		return fmt.Errorf("%s is not ferry's source tree (run from the repository root): %w", o.RepoRoot, err)
	}
	return nil
}

// scaleProviderID names the i-th provider (from 1).
func scaleProviderID(i int) ferryv1alpha1.ClusterID {
	return ferryv1alpha1.ClusterID("provider-" + strconv.Itoa(i))
}

// scaleBed is a scale run's clusters and ferry processes.
type scaleBed struct {
	consumer  *testbed.Cluster
	providers []*testbed.Cluster
	ids       []ferryv1alpha1.ClusterID // of providers, in order
	// consumerCM and providerCMs are ferry-controller-manager of each
	// cluster, run as processes; the consumer's runs the virtual kubelets.
	consumerCM  *ferryProcess
	providerCMs []*ferryProcess
	namespaces  []string
	// auditLogs are the API servers' audit logs of writes, by cluster
	// name, when the run has a window at rest.
	auditLogs map[string]string
}

func (b *scaleBed) clusters() []*testbed.Cluster {
	return append([]*testbed.Cluster{b.consumer}, b.providers...)
}

// Names of the measured processes.
func cmName(cluster string) string { return "controller-manager/" + cluster }
func vkName(id ferryv1alpha1.ClusterID) string {
	return "virtual-kubelet/" + string(id)
}

// pids are ferry's processes: each cluster's controller manager and each
// provider's virtual kubelet.
func (b *scaleBed) pids() (map[string]int, error) {
	out := map[string]int{cmName(b.consumer.Name): b.consumerCM.PID()}
	for i, p := range b.providers {
		out[cmName(p.Name)] = b.providerCMs[i].PID()
	}
	kubelets := b.consumerCM.VirtualKubeletPIDs()
	for _, id := range b.ids {
		pid, ok := kubelets[peering.VirtualNodeName(id)]
		if !ok {
			return nil, fmt.Errorf("no virtual kubelet of %s runs under the consumer's controller manager (found %v)", id, kubelets)
		}
		out[vkName(id)] = pid
	}
	return out, nil
}

// RunScale starts a consumer and opts.Providers providers with
// ferry-controller-manager as a process in each, peers each, offloads
// opts.Namespaces namespaces to all of them, counts the open watches with
// one namespace offloaded and with all; with opts.Direct creates opts.Pods
// pods directly in the providers, then as many offloaded over the
// namespaces, measures both runs, then the window at rest, and prints the
// figures and the RESULT line.
func RunScale(ctx context.Context, opts ScaleOptions) (err error) {
	if err := opts.validate(); err != nil {
		return err
	}
	if opts.Restarts {
		return runRestartScale(ctx, opts)
	}
	say := progress(opts.Out)
	perProvider := (opts.Pods + opts.Providers - 1) / opts.Providers
	bed := &scaleBed{auditLogs: map[string]string{}}
	clusterOpts := []testbed.Options{consumerOptions(false)}
	for i := 1; i <= opts.Providers; i++ {
		o := providerOptions(perProvider, false)
		o.Name = string(scaleProviderID(i))
		clusterOpts = append(clusterOpts, o)
	}
	if opts.Steady > 0 {
		auditDir, err := os.MkdirTemp("", "ferry-bench-audit-")
		if err != nil {
			return fmt.Errorf("create folder for audit logs: %w", err)
		}
		defer func() { _ = os.RemoveAll(auditDir) }()
		for i := range clusterOpts {
			args, path, err := auditArgs(auditDir, clusterOpts[i].Name)
			if err != nil {
				return err
			}
			clusterOpts[i].ExtraAPIServerArgs = append(clusterOpts[i].ExtraAPIServerArgs, args...)
			bed.auditLogs[clusterOpts[i].Name] = path
		}
	}
	say("starting clusters: consumer and %d providers (%d nodes of %d pods each)", opts.Providers, providerNodes, podsPerNode(perProvider))
	pb, err := startPeeredBed(ctx, opts.RepoRoot, clusterOpts, opts.ClusterRead, say)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pb.stop()) }()
	bed.consumer, bed.providers, bed.consumerCM, bed.providerCMs, bed.ids = pb.consumer, pb.providers, pb.consumerCM, pb.providerCMs, pb.ids
	clusters := bed.clusters()

	stopSupervising := bed.supervise(ctx, say)
	defer stopSupervising()

	bed.namespaces = make([]string, opts.Namespaces)
	// cluster -> open watches with 1 namespace and with all: every watch,
	// and those of one namespace (what grows with twin namespaces).
	watches, nsWatches := map[string][2]float64{}, map[string][2]float64{}
	for i := range bed.namespaces {
		bed.namespaces[i] = fmt.Sprintf("scale-%03d", i)
		if _, err := offloadNamespaceTo(ctx, bed.consumer, bed.namespaces[i], bed.ids...); err != nil {
			return err
		}
		if i == 0 || i == len(bed.namespaces)-1 {
			if err := settleWatches(ctx, clusters, watches, nsWatches, min(i, 1)); err != nil {
				return err
			}
		}
		if (i+1)%10 == 0 {
			say("%d namespaces offloaded", i+1)
		}
	}
	if len(bed.namespaces) == 1 {
		for _, m := range []map[string][2]float64{watches, nsWatches} {
			for name, w := range m {
				m[name] = [2]float64{w[0], w[0]}
			}
		}
	}
	for _, id := range bed.ids {
		if err := waitVirtualNodeRoomOf(ctx, bed.consumer, peering.VirtualNodeName(id), perProvider); err != nil {
			return err
		}
	}
	pids, err := bed.pids()
	if err != nil {
		return err
	}
	idle, err := readProcs(pids)
	if err != nil {
		return err
	}
	say("ferry's processes before any pod: %s", renderRSS(idle))

	fig := scaleFigures{pods: opts.Pods, providers: opts.Providers, namespaces: opts.Namespaces, clusterRead: opts.ClusterRead}
	if opts.Direct {
		if fig.direct, err = bed.runDirect(ctx, opts, bed.livePIDs(), say); err != nil {
			return err
		}
	}
	if err := bed.runOffloaded(ctx, opts, bed.livePIDs(), &fig, say); err != nil {
		return err
	}
	all := map[string]float64{}
	for _, c := range clusters {
		w, _, err := openWatches(ctx, c)
		if err != nil {
			return err
		}
		all[c.Name] = w
	}
	fig.watchesConsumer, fig.watchesProvider = all[bed.consumer.Name], worstOf(all, func(name string) bool { return name != bed.consumer.Name })
	say("open watches with all pods Running: %s", renderFloats(all, "%.0f"))
	if opts.Steady > 0 {
		if err := bed.rest(ctx, opts, bed.livePIDs(), &fig, say); err != nil {
			return err
		}
	}

	names := slices.Sorted(maps.Keys(watches))
	constant := true
	var parts []string
	for _, name := range names {
		w, nw := watches[name], nsWatches[name]
		say("open watches on %s: %.0f with 1 offloaded namespace, %.0f with %d; of them in one namespace: %.0f and %.0f",
			name, w[0], w[1], opts.Namespaces, nw[0], nw[1])
		constant = constant && nw[1] <= nw[0]
		key := strings.ReplaceAll(name, "-", "_")
		parts = append(parts, fmt.Sprintf("watches_%s=%.0f/%.0f namespace_watches_%s=%.0f/%.0f", key, w[0], w[1], key, nw[0], nw[1]))
	}
	verdict := "met"
	if !constant {
		verdict = "MISSED"
	}
	fmt.Fprintf(opts.Out, "target scale namespace-scoped watches constant from 1 to %d namespaces: %s\n", opts.Namespaces, verdict)
	fig.cmRestarts = bed.restartCount()
	fig.printTargets(opts.Out)
	fmt.Fprintf(opts.Out, "%s%s %s\n", scaleResultPrefix, fig.result(), strings.Join(parts, " "))
	return nil
}

// runDirect creates the pods directly in the providers' namespace direct,
// round robin over the providers, and measures the run.
func (b *scaleBed) runDirect(ctx context.Context, opts ScaleOptions, pids map[string]int, say func(string, ...any)) (*scaleRunFigures, error) {
	kubes := make([]kubernetes.Interface, len(b.providers))
	for i, p := range b.providers {
		if err := createNamespace(ctx, p, directNamespace); err != nil {
			return nil, err
		}
		var err error
		if kubes[i], err = harnessClient(p); err != nil {
			return nil, err
		}
	}
	say("direct run: creating %d pods in namespace %s of the %d providers, %d create calls at a time", opts.Pods, directNamespace, len(b.providers), opts.Concurrency)
	return b.measure(ctx, "direct", opts, pids, say,
		func(ctx context.Context, wg *sync.WaitGroup, tl *timeline) []cache.InformerSynced {
			var synced []cache.InformerSynced
			for _, kube := range kubes {
				synced = append(synced, watchPods(ctx, wg, kube, directNamespace, "direct-", tl, "", bound, running))
			}
			return synced
		},
		func(ctx context.Context, i int, tl *timeline) error {
			name := fmt.Sprintf("direct-%05d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: directNamespace, Labels: map[string]string{"app": "bench"}}, Spec: podSpec()}
			tl.mark(name, created, time.Now())
			if _, err := kubes[i%len(kubes)].CoreV1().Pods(directNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s in %s: %w", directNamespace, name, b.providers[i%len(kubes)].Name, err)
			}
			return nil
		})
}

// runOffloaded creates the pods in the consumer over the offloaded
// namespaces and measures the run, its etcd growth and ferry's processes.
func (b *scaleBed) runOffloaded(ctx context.Context, opts ScaleOptions, pids map[string]int, fig *scaleFigures, say func(string, ...any)) error {
	kube, err := harnessClient(b.consumer)
	if err != nil {
		return err
	}
	etcdBefore, err := b.readEtcd(ctx)
	if err != nil {
		return err
	}
	if fig.objectsBefore, err = b.storageObjects(ctx); err != nil {
		return err
	}
	say("offloaded run: creating %d pods over %d namespaces, %d create calls at a time", opts.Pods, opts.Namespaces, opts.Concurrency)
	if fig.offload, err = b.measure(ctx, "offloaded", opts, pids, say,
		func(ctx context.Context, wg *sync.WaitGroup, tl *timeline) []cache.InformerSynced {
			return []cache.InformerSynced{watchPods(ctx, wg, kube, "", "scale-", tl, "", bound, running)}
		},
		func(ctx context.Context, i int, tl *timeline) error {
			ns := b.namespaces[i%len(b.namespaces)]
			name := fmt.Sprintf("scale-%05d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench"}}, Spec: offloadedPodSpec()}
			tl.mark(name, created, time.Now())
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
			}
			return nil
		}); err != nil {
		return err
	}
	etcdAfter, err := b.readEtcd(ctx)
	if err != nil {
		return err
	}
	fig.etcd(etcdBefore, etcdAfter, b.consumer.Name, "")
	say("etcd added per pod: %s", fig.etcdLine(""))
	if fig.procs, err = readProcs(pids); err != nil {
		return err
	}

	all, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", b.consumer.Name, err)
	}
	onNode := map[string]int{}
	for _, p := range all.Items {
		onNode[p.Spec.NodeName]++
	}
	for _, id := range b.ids {
		f := fig.procs[vkName(id)]
		pods := onNode[peering.VirtualNodeName(id)]
		per1000 := float64(f.rss) / (1 << 20) / max(1, float64(pods)/1000)
		fig.vkPer1000 = max(fig.vkPer1000, per1000)
		say("virtual kubelet of %s: %d pods, %d MiB resident (%d anonymous; peak %d), %.0f MiB per 1000 pods, %.2f cores over the run",
			id, pods, f.rss>>20, f.anon>>20, f.peak>>20, per1000, fig.offload.cores[vkName(id)])
	}
	for _, c := range b.clusters() {
		f := fig.procs[cmName(c.Name)]
		say("ferry-controller-manager of %s: %d MiB resident (%d anonymous; peak %d), %.2f cores over the run",
			c.Name, f.rss>>20, f.anon>>20, f.peak>>20, fig.offload.cores[cmName(c.Name)])
	}
	return nil
}

// measure runs one set of pods: it starts the watches, measures the idle
// request rate, counts requests and CPU around creating the pods
// (create(i) for each, opts.Concurrency at a time) and waiting until all
// are Running and Ready, and the settle after.
func (b *scaleBed) measure(ctx context.Context, name string, opts ScaleOptions, pids map[string]int, say func(string, ...any),
	watch func(context.Context, *sync.WaitGroup, *timeline) []cache.InformerSynced, create func(context.Context, int, *timeline) error) (*scaleRunFigures, error) {
	res := &runResult{name: name, pods: opts.Pods, stages: []stage{created, bound, running}, timeline: newTimeline(), requests: map[string]requestCounts{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWatch()
	if !cache.WaitForCacheSync(ctx.Done(), watch(watchCtx, &wg, res.timeline)...) {
		return nil, fmt.Errorf("%s run: start watches: %w", name, ctx.Err())
	}
	run := podRun{name: name, shape: Shape{Name: ShapeBurst, Pods: opts.Pods, Concurrency: opts.Concurrency}, counted: b.clusters()}
	idle, err := run.idleRequests(ctx)
	if err != nil {
		return nil, err
	}
	before := map[string]requestCounts{}
	for _, c := range b.clusters() {
		if before[c.Name], err = scrapeRequests(ctx, c); err != nil {
			return nil, err
		}
	}
	cpu, err := startCPUWindow(pids)
	if err != nil {
		return nil, err
	}
	countedFrom := time.Now()
	createErr := make(chan error, 1)
	go func() {
		createErr <- run.createEach(ctx, opts.Pods, func(ctx context.Context, i int) error { return create(ctx, i, res.timeline) })
	}()
	if err := run.waitRunning(ctx, res, createErr, say); err != nil {
		return nil, err
	}
	cores, err := cpu.cores()
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(settle):
	}
	for _, c := range b.clusters() {
		after, err := scrapeRequests(ctx, c)
		if err != nil {
			return nil, err
		}
		res.requests[c.Name] = after.minus(before[c.Name])
	}
	res.idleRequests = idle * time.Since(countedFrom).Seconds()
	st := res.stats()
	out := &scaleRunFigures{stats: st, cores: cores, wall: time.Duration(float64(opts.Pods) / st.Throughput * float64(time.Second))}
	out.consumerPerPod = st.RequestsPerPodBy[b.consumer.Name]
	for _, p := range b.providers {
		out.providersPerPod += st.RequestsPerPodBy[p.Name]
	}
	say("%s run: all %d pods Running in %.1fs: p50 %s p99 %s, %.1f pods/s; requests per pod %.1f (net of idle %.1f): consumer %.1f, providers %.1f",
		name, opts.Pods, out.wall.Seconds(), ms(st.P50), ms(st.P99), st.Throughput, st.RequestsPerPod, st.NetRequestsPerPod, out.consumerPerPod, out.providersPerPod)
	for _, c := range b.clusters() {
		say("%s run: requests served by %s: %d; most: %s", name, c.Name, res.requests[c.Name].total(), res.requests[c.Name].top(6))
	}
	say("%s run: CPU cores (mean over the run): %s", name, renderFloats(cores, "%.2f"))
	return out, nil
}

func (b *scaleBed) readEtcd(ctx context.Context) (map[string]etcdFigures, error) {
	out := map[string]etcdFigures{}
	for _, c := range b.clusters() {
		f, err := readEtcd(ctx, c)
		if err != nil {
			return nil, err
		}
		out[c.Name] = f
	}
	return out, nil
}

func (b *scaleBed) storageObjects(ctx context.Context) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for _, c := range b.clusters() {
		o, err := storageObjects(ctx, c)
		if err != nil {
			return nil, err
		}
		out[c.Name] = o
	}
	return out, nil
}

// restProgressPeriod is how often the window at rest says how far it is.
const restProgressPeriod = time.Minute

// auditFlush is how long the window's end waits for the API servers'
// batched audit events.
const auditFlush = 3 * time.Second

// rest keeps the clusters at rest for opts.Steady and measures the writes
// (by program, from the audit logs), requests, CPU and memory growth of
// ferry's processes over it.
func (b *scaleBed) rest(ctx context.Context, opts ScaleOptions, pids map[string]int, fig *scaleFigures, say func(string, ...any)) error {
	offsets := map[string]int64{}
	for name, path := range b.auditLogs {
		st, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("audit log of %s: %w", name, err)
		}
		offsets[name] = st.Size()
	}
	before := map[string]requestCounts{}
	for _, c := range b.clusters() {
		var err error
		if before[c.Name], err = scrapeRequests(ctx, c); err != nil {
			return err
		}
	}
	start, err := readProcs(pids)
	if err != nil {
		return err
	}
	cpu, err := startCPUWindow(pids)
	if err != nil {
		return err
	}
	from := time.Now()
	say("at rest for %s", opts.Steady)
	tick := time.NewTicker(restProgressPeriod)
	defer tick.Stop()
	end := time.After(opts.Steady)
wait:
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-end:
			break wait
		case <-tick.C:
			now, err := readProcs(pids)
			if err != nil {
				return err
			}
			say("at rest %s of %s: %s", time.Since(from).Round(time.Second), opts.Steady, renderRSS(now))
		}
	}
	to := time.Now()
	stop, err := readProcs(pids)
	if err != nil {
		return err
	}
	if fig.restCores, err = cpu.cores(); err != nil {
		return err
	}
	var requests int64
	for _, c := range b.clusters() {
		after, err := scrapeRequests(ctx, c)
		if err != nil {
			return err
		}
		d := after.minus(before[c.Name])
		requests += d.total()
		say("at rest: requests served by %s: %d; most: %s", c.Name, d.total(), d.top(6))
	}
	fig.restSeconds = to.Sub(from).Seconds()
	fig.restRequestsPerS = float64(requests) / fig.restSeconds
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(auditFlush):
	}
	fig.restWrites = writesByAgent{}
	for _, c := range b.clusters() {
		w, err := readAuditWrites(b.auditLogs[c.Name], offsets[c.Name], from, to)
		if err != nil {
			return fmt.Errorf("audit log of %s: %w", c.Name, err)
		}
		say("at rest: writes to %s by program: %s", c.Name, w)
		w.addTo(fig.restWrites)
	}
	fig.restGrowth = map[string]float64{}
	for name, s := range stop {
		if st, ok := start[name]; ok && pids[name] != 0 {
			fig.restGrowth[name] = float64(s.rss-st.rss) / (1 << 20)
		}
	}
	say("at rest: resident memory growth (MiB) over %s: %s; CPU cores: %s", opts.Steady, renderFloats(fig.restGrowth, "%+.1f"), renderFloats(fig.restCores, "%.3f"))
	etcdAfter, err := b.readEtcd(ctx)
	if err != nil {
		return err
	}
	fig.etcd(nil, etcdAfter, b.consumer.Name, "rest_")
	objects, err := b.storageObjects(ctx)
	if err != nil {
		return err
	}
	for _, c := range b.clusters()[:min(2, len(b.clusters()))] {
		say("at rest: objects added in %s since before the offloaded run (apiserver_storage_objects): %s", c.Name, objectsAdded(fig.objectsBefore[c.Name], objects[c.Name], opts.Pods))
	}
	say("etcd bytes per pod after the window (compacted every 5 minutes): %s", fig.etcdLine("rest_"))
	return nil
}

// scaleRunFigures are one run's figures (direct or offloaded).
type scaleRunFigures struct {
	stats RunStats
	// wall is the time from the first create call to the last pod Running.
	wall time.Duration
	// cores is each of ferry's processes' mean CPU use over the run.
	cores                           map[string]float64
	consumerPerPod, providersPerPod float64
}

// scaleFigures are a scale run's figures, for the targets and the RESULT
// line.
type scaleFigures struct {
	pods, providers, namespaces int
	clusterRead                 bool
	direct, offload             *scaleRunFigures
	// procs is ferry's processes' memory after the offloaded run.
	procs     map[string]procFigures
	vkPer1000 float64
	// etcdPerPod are the etcd keys and bytes added per pod: by key
	// (etcd_objects_per_pod_consumer, ..._provider summed over providers).
	etcdPerPod                       map[string]float64
	etcdBaseline                     map[string]etcdFigures
	objectsBefore                    map[string]map[string]float64
	watchesConsumer, watchesProvider float64

	// cmRestarts is how many times a controller manager exited on its own
	// (and was started again) during the run.
	cmRestarts int

	restSeconds, restRequestsPerS float64
	restWrites                    writesByAgent
	restGrowth, restCores         map[string]float64
}

// etcd records the keys and bytes added per pod from before (nil: from
// the baseline of the first call) to after, under keys prefixed prefix.
func (f *scaleFigures) etcd(before, after map[string]etcdFigures, consumer, prefix string) {
	if before == nil {
		before = f.etcdBaseline
	} else {
		f.etcdBaseline = before
	}
	if f.etcdPerPod == nil {
		f.etcdPerPod = map[string]float64{}
	}
	pods := float64(f.pods)
	for name, a := range after {
		side := "provider"
		if name == consumer {
			side = "consumer"
		}
		f.etcdPerPod[prefix+"etcd_objects_per_pod_"+side] += (a.keys - before[name].keys) / pods
		f.etcdPerPod[prefix+"etcd_bytes_per_pod_"+side] += (a.bytesInUse - before[name].bytesInUse) / pods
	}
}

func (f *scaleFigures) etcdLine(prefix string) string {
	var parts []string
	for _, side := range []string{"consumer", "provider"} {
		parts = append(parts, fmt.Sprintf("%s %.1f objects, %.0f bytes", side,
			f.etcdPerPod[prefix+"etcd_objects_per_pod_"+side], f.etcdPerPod[prefix+"etcd_bytes_per_pod_"+side]))
	}
	return strings.Join(parts, "; ") + " (providers summed)"
}

// Targets of issue 37 (at 10,000 pods on one virtual node for the virtual
// kubelet's).
const (
	targetScaleTimeRatio = 1.5
	targetScaleVKCores   = 0.5
	targetScaleVKMiB     = 250
	// targetRestGrowthMiB is how much a process may grow at rest and
	// still count as flat (the Go heap breathes by a few MiB).
	targetRestGrowthMiB = 4
)

// worst is the largest figure among the processes whose name starts with prefix.
func worst[V int64 | float64](m map[string]V, prefix string) V {
	var w V
	first := true
	for name, v := range m {
		if strings.HasPrefix(name, prefix) && (first || v > w) {
			w, first = v, false
		}
	}
	return w
}

func worstOf(m map[string]float64, keep func(string) bool) float64 {
	var w float64
	for name, v := range m {
		if keep(name) {
			w = max(w, v)
		}
	}
	return w
}

func (f *scaleFigures) timeRatio() float64 {
	if f.direct == nil {
		return math.NaN()
	}
	return f.offload.wall.Seconds() / f.direct.wall.Seconds()
}

// value renders a figure, "na" when it was not measured.
func value(format string, v float64) string {
	if math.IsNaN(v) {
		return "na"
	}
	return fmt.Sprintf(format, v)
}

func (f *scaleFigures) vkPeakMiB() float64 {
	var w int64
	for name, p := range f.procs {
		if strings.HasPrefix(name, "virtual-kubelet/") {
			w = max(w, p.peak)
		}
	}
	return float64(w) / (1 << 20)
}

func (f *scaleFigures) cmPeakMiB(consumer bool) float64 {
	var w int64
	for name, p := range f.procs {
		if name == cmName(string(consumerID)) == consumer && strings.HasPrefix(name, "controller-manager/") {
			w = max(w, p.peak)
		}
	}
	return float64(w) / (1 << 20)
}

func (f *scaleFigures) cmCores(m map[string]float64, consumer bool) float64 {
	return worstOf(m, func(name string) bool {
		return strings.HasPrefix(name, "controller-manager/") && name == cmName(string(consumerID)) == consumer
	})
}

func (f *scaleFigures) printTargets(w io.Writer) {
	type target struct {
		name         string
		value, limit float64
		note         string
	}
	ts := []target{
		{"time_ratio", f.timeRatio(), targetScaleTimeRatio, "at 10,000 pods"},
		{"vk_cpu_cores", worst(f.offload.cores, "virtual-kubelet/"), targetScaleVKCores, "at 10,000 pods"},
		{"vk_rss_mib", f.vkPeakMiB(), targetScaleVKMiB, "at 10,000 pods"},
		{"requests_per_pod", f.offload.stats.NetRequestsPerPod, targetRequestsPerPod, "net of idle, both sides"},
	}
	if f.restWrites != nil {
		ferryWrites, _, _ := f.restWrites.split()
		ts = append(ts, target{"rest_writes_ferry", float64(ferryWrites), 0, "leases (heartbeats, leader election) apart"},
			target{"rest_rss_growth_mib", worst(f.restGrowth, ""), targetRestGrowthMiB, "flat memory, any of ferry's processes"})
	}
	for _, t := range ts {
		verdict := "met"
		switch {
		case math.IsNaN(t.value):
			verdict = "not measured"
		case t.value > t.limit:
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "target scale %s <= %g (%s): %s (%s)\n", t.name, t.limit, t.note, verdict, value("%.2f", t.value))
	}
}

// result is the RESULT line's keys after "RESULT scale ".
func (f *scaleFigures) result() string {
	o := f.offload
	var b strings.Builder
	fmt.Fprintf(&b, "pods=%d providers=%d namespaces=%d time_ratio=%s vk_rss_mib=%.0f vk_cpu_cores=%.3f requests_per_pod=%.1f",
		f.pods, f.providers, f.namespaces, value("%.2f", f.timeRatio()), f.vkPeakMiB(), worst(o.cores, "virtual-kubelet/"), o.stats.NetRequestsPerPod)
	directS, directP50, directP99 := math.NaN(), math.NaN(), math.NaN()
	if d := f.direct; d != nil {
		directS, directP50, directP99 = d.wall.Seconds(), millis(d.stats.P50), millis(d.stats.P99)
	}
	fmt.Fprintf(&b, " cluster_read=%t offload_s=%.1f direct_s=%s offload_p50_ms=%.0f offload_p99_ms=%.0f direct_p50_ms=%s direct_p99_ms=%s pods_per_s=%.1f",
		f.clusterRead, o.wall.Seconds(), value("%.1f", directS), millis(o.stats.P50), millis(o.stats.P99), value("%.0f", directP50), value("%.0f", directP99), o.stats.Throughput)
	fmt.Fprintf(&b, " vk_rss_mib_per_1000_pods=%.0f cm_consumer_rss_mib=%.0f cm_consumer_cpu_cores=%.3f cm_provider_rss_mib=%.0f cm_provider_cpu_cores=%.3f",
		f.vkPer1000, f.cmPeakMiB(true), f.cmCores(o.cores, true), f.cmPeakMiB(false), f.cmCores(o.cores, false))
	fmt.Fprintf(&b, " cm_restarts=%d", f.cmRestarts)
	fmt.Fprintf(&b, " requests_per_pod_raw=%.1f requests_per_pod_consumer=%.1f requests_per_pod_providers=%.1f open_watches_consumer=%.0f open_watches_provider=%.0f",
		o.stats.RequestsPerPod, o.consumerPerPod, o.providersPerPod, f.watchesConsumer, f.watchesProvider)
	for _, k := range slices.Sorted(maps.Keys(f.etcdPerPod)) {
		format := " %s=%.0f"
		if strings.Contains(k, "objects") {
			format = " %s=%.2f"
		}
		fmt.Fprintf(&b, format, k, f.etcdPerPod[k])
	}
	if f.restWrites != nil {
		ferryWrites, heartbeats, others := f.restWrites.split()
		fmt.Fprintf(&b, " rest_s=%.0f rest_writes_ferry=%d rest_heartbeats_ferry=%d rest_writes_other=%d rest_requests_per_s=%.1f",
			f.restSeconds, ferryWrites, heartbeats, others, f.restRequestsPerS)
		fmt.Fprintf(&b, " rest_vk_rss_growth_mib=%.1f rest_cm_consumer_rss_growth_mib=%.1f rest_cm_provider_rss_growth_mib=%.1f rest_vk_cpu_cores=%.3f rest_cm_consumer_cpu_cores=%.3f rest_cm_provider_cpu_cores=%.3f",
			worst(f.restGrowth, "virtual-kubelet/"), f.restGrowth[cmName(string(consumerID))], worstOf(f.restGrowth, func(n string) bool {
				return strings.HasPrefix(n, "controller-manager/") && n != cmName(string(consumerID))
			}), worst(f.restCores, "virtual-kubelet/"), f.cmCores(f.restCores, true), f.cmCores(f.restCores, false))
	}
	return b.String()
}

// renderRSS renders each process's resident memory, anonymous part and peak.
func renderRSS(procs map[string]procFigures) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(procs)) {
		p := procs[name]
		parts = append(parts, fmt.Sprintf("%s %d MiB (%d anonymous, peak %d)", name, p.rss>>20, p.anon>>20, p.peak>>20))
	}
	return strings.Join(parts, ", ")
}

func renderFloats(m map[string]float64, format string) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+" "+fmt.Sprintf(format, m[name]))
	}
	return strings.Join(parts, ", ")
}

// grantClusterRead binds the provider's ferry-reflection-reader ClusterRole
// to the consumer's ServiceAccount there, before peering.
func grantClusterRead(ctx context.Context, provider *testbed.Cluster) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ferry-reflection-reader-" + string(consumerID)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ferry-reflection-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: peering.TenantNamespace(consumerID),
			Name: ferryv1alpha1.ConsumerServiceAccount}},
	}
	if err := provider.Client.Create(ctx, crb); err != nil {
		return fmt.Errorf("bind ferry-reflection-reader in %s: %w", provider.Name, err)
	}
	return nil
}

// watchSettle is how long the watch counts are left to settle after a
// namespace is offloaded (the virtual kubelets start watching its twins).
const watchSettle = 5 * time.Second

// settleWatches waits watchSettle and records, at index at, the watches
// open on every cluster, all and those of one namespace.
func settleWatches(ctx context.Context, clusters []*testbed.Cluster, into, nsInto map[string][2]float64, at int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(watchSettle):
	}
	for _, c := range clusters {
		all, inNamespace, err := openWatches(ctx, c)
		if err != nil {
			return err
		}
		w, nw := into[c.Name], nsInto[c.Name]
		w[at], nw[at] = all, inNamespace
		into[c.Name], nsInto[c.Name] = w, nw
	}
	return nil
}

// openWatches is how many watches c's API server serves now
// (apiserver_longrunning_requests, verb WATCH), all and those of one
// namespace.
func openWatches(ctx context.Context, c *testbed.Cluster) (all, inNamespace float64, err error) {
	raw, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read /metrics of %s: %w", c.Name, err)
	}
	return sumWatches(string(raw))
}

// sumWatches adds the WATCH series of apiserver_longrunning_requests in a
// Prometheus text exposition: all, and those of scope namespace.
func sumWatches(text string) (all, inNamespace float64, err error) {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{")
		if !ok {
			continue
		}
		labels, value, err := parseLabels(rest)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", line, err)
		}
		if labels["verb"] != "WATCH" {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			return 0, 0, fmt.Errorf("%s: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: value: %w", line, err)
		}
		all += v
		if labels["scope"] == "namespace" {
			inNamespace += v
		}
	}
	return all, inNamespace, nil
}
