package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// restartTimeout bounds each restart's convergence.
const restartTimeout = 15 * time.Minute

// apiServerDown is how long the provider's API server stays stopped.
const apiServerDown = 20 * time.Second

// probePrefix names the pods created at each restart, to see ferry offload
// again; they are left out of the UID comparison.
const probePrefix = "restart-probe-"

// restartBed is what the restarts act on: the clusters, ferry's processes
// and the offloaded pods, all Running.
type restartBed struct {
	consumer    *testbed.Cluster
	providers   []*testbed.Cluster
	consumerCM  *ferryProcess
	providerCMs []*ferryProcess
	namespaces  []string
	pods        int
}

// restartFigures are one restart's: times from the kill, requests served
// meanwhile and what changed.
type restartFigures struct {
	what      string
	pods      int
	leaseWait time.Duration // until the new controller manager held the Lease
	converge  time.Duration // after that (or the kill) until every pod was Running and Ready again, a new one too, and the processes back
	probe     time.Duration // after that until the new pod ran
	list      int64         // LIST requests served by all API servers meanwhile
	watch     int64         // WATCH requests
	recreated uidChanges
	lost      uidChanges
	notReady  int   // offloaded pods not Running and Ready after convergence
	rssPeak   int64 // bytes: the worst virtual kubelet's peak over the restart
	cmRSSPeak int64 // bytes: the restarted controller manager's peak, if one was
	cmExits   int   // controller managers that exited on their own meanwhile (started again)
	load      string
}

// uidChanges counts pods by side: the consumer's, the ShadowPods and the
// providers' (remote) pods.
type uidChanges struct{ consumer, shadow, remote int }

func (u uidChanges) total() int { return u.consumer + u.shadow + u.remote }

// result is the RESULT line's keys.
func (f restartFigures) result() string {
	return fmt.Sprintf("RESULT restart what=%s pods=%d converge_s=%.1f probe_s=%.1f lease_wait_s=%.1f requests_list=%d requests_watch=%d recreated=%d lost=%d rss_peak_mib=%d"+
		" recreated_consumer=%d recreated_shadowpods=%d recreated_remote=%d lost_consumer=%d lost_shadowpods=%d lost_remote=%d not_ready=%d cm_rss_peak_mib=%d cm_exits=%d load=%s",
		f.what, f.pods, f.converge.Seconds(), f.probe.Seconds(), f.leaseWait.Seconds(), f.list, f.watch, f.recreated.total(), f.lost.total(), f.rssPeak>>20,
		f.recreated.consumer, f.recreated.shadow, f.recreated.remote, f.lost.consumer, f.lost.shadow, f.lost.remote, f.notReady, f.cmRSSPeak>>20, f.cmExits, f.load)
}

// uidSet is a side's pods (or ShadowPods): key -> UID.
type uidSet map[string]types.UID

// compareUIDs counts the keys of before whose UID changed in after
// (recreated) and those missing from after (lost).
func compareUIDs(before, after uidSet) (recreated, lost int) {
	for k, uid := range before {
		switch now, ok := after[k]; {
		case !ok:
			lost++
		case now != uid:
			recreated++
		}
	}
	return recreated, lost
}

// listAndWatch sums the LIST and WATCH requests among counts.
func listAndWatch(counts requestCounts) (list, watch int64) {
	for kind, n := range counts {
		switch verb, _, _ := strings.Cut(kind, " "); verb {
		case "LIST":
			list += n
		case "WATCH":
			watch += n
		}
	}
	return list, watch
}

// snapshot is the UIDs of every side, and how many consumer pods are not
// Running and Ready.
type snapshot struct {
	consumer, shadow, remote uidSet
	notReady                 int
}

// snapshot lists the pods and ShadowPods; consumerOnly, only the
// consumer's pods.
func (b *restartBed) snapshot(ctx context.Context, consumerOnly bool) (snapshot, error) {
	s := snapshot{consumer: uidSet{}, shadow: uidSet{}, remote: uidSet{}}
	for _, ns := range b.namespaces {
		var pods corev1.PodList
		if err := b.consumer.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return s, fmt.Errorf("list pods of %s/%s: %w", b.consumer.Name, ns, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if strings.HasPrefix(p.Name, probePrefix) {
				continue
			}
			s.consumer[p.Namespace+"/"+p.Name] = p.UID
			if !runningAndReady(p) {
				s.notReady++
			}
		}
	}
	if consumerOnly {
		return s, nil
	}
	origin := client.MatchingLabels{ferryv1alpha1.LabelOriginCluster: string(consumerID)}
	for _, c := range b.providers {
		var sps ferryv1alpha1.ShadowPodList
		if err := c.Client.List(ctx, &sps); err != nil {
			return s, fmt.Errorf("list ShadowPods of %s: %w", c.Name, err)
		}
		for _, sp := range sps.Items {
			if !strings.HasPrefix(sp.Labels[ferryv1alpha1.LabelOriginName], probePrefix) {
				s.shadow[c.Name+"/"+sp.Namespace+"/"+sp.Name] = sp.UID
			}
		}
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, origin); err != nil {
			return s, fmt.Errorf("list offloaded pods of %s: %w", c.Name, err)
		}
		for _, p := range pods.Items {
			if !strings.HasPrefix(p.Labels[ferryv1alpha1.LabelOriginName], probePrefix) {
				s.remote[c.Name+"/"+p.Namespace+"/"+p.Name] = p.UID
			}
		}
	}
	return s, nil
}

// cms are every cluster's controller manager.
func (b *restartBed) cms() []*ferryProcess {
	return append([]*ferryProcess{b.consumerCM}, b.providerCMs...)
}

// exits is how many times the controller managers exited on their own.
func (b *restartBed) exits() int {
	n := 0
	for _, cm := range b.cms() {
		n += cm.Exits()
	}
	return n
}

// scrapeAll reads the request counters of every API server.
func (b *restartBed) scrapeAll(ctx context.Context) (map[string]requestCounts, error) {
	out := map[string]requestCounts{}
	for _, c := range append([]*testbed.Cluster{b.consumer}, b.providers...) {
		counts, err := scrapeRequests(ctx, c)
		if err != nil {
			return nil, err
		}
		out[c.Name] = counts
	}
	return out, nil
}

// restartCase is one restart: act kills or stops something and, returning,
// has restarted it. It returns when convergence begins (zero: at the kill)
// — with lease, when the restarted controller manager took its Lease —,
// the cluster whose API server's counters began again from zero, if any,
// and the restarted controller manager, if any.
type restartCase struct {
	what  string
	lease bool
	act   func(ctx context.Context) (ready time.Time, restartedAPI string, cm *ferryProcess, err error)
}

// runRestarts restarts, in turn, a virtual kubelet (SIGKILL; its controller
// manager starts it again), the consumer's controller manager with its
// virtual kubelets and the first provider's (SIGKILL, started again at once:
// the new one waits for the killed one's Lease to expire), and the first
// provider's API server (stopped for apiServerDown); after each it waits
// until a pod created at the kill runs and the virtual kubelets are back,
// and prints the RESULT restart line.
func runRestarts(ctx context.Context, b *restartBed, out io.Writer, say func(string, ...any)) error {
	kube, err := harnessClient(b.consumer)
	if err != nil {
		return err
	}
	vkName := peering.VirtualNodeName(scaleProviderID(1))
	cases := []restartCase{
		{what: "vk", act: func(ctx context.Context) (time.Time, string, *ferryProcess, error) {
			pid := b.consumerCM.VirtualKubeletPIDs()[vkName]
			if pid == 0 {
				return time.Time{}, "", nil, fmt.Errorf("no virtual kubelet of %s runs", vkName)
			}
			say("SIGKILL to the virtual kubelet of %s (pid %d)", vkName, pid)
			return time.Time{}, "", nil, syscall.Kill(pid, syscall.SIGKILL)
		}},
		{what: "controller-manager", lease: true, act: func(ctx context.Context) (time.Time, string, *ferryProcess, error) {
			return b.restartCM(ctx, b.consumer, b.consumerCM, say)
		}},
		{what: "provider-controller-manager", lease: true, act: func(ctx context.Context) (time.Time, string, *ferryProcess, error) {
			return b.restartCM(ctx, b.providers[0], b.providerCMs[0], say)
		}},
		{what: "provider-apiserver", act: func(ctx context.Context) (time.Time, string, *ferryProcess, error) {
			p := b.providers[0]
			say("stopping the API server of %s for %s", p.Name, apiServerDown)
			p.StopAPIServer()
			select {
			case <-ctx.Done():
				return time.Time{}, "", nil, ctx.Err()
			case <-time.After(apiServerDown):
			}
			if err := p.StartAPIServer(ctx); err != nil {
				return time.Time{}, "", nil, err
			}
			say("API server of %s back", p.Name)
			// Timed from its return.
			return time.Now(), p.Name, nil, nil
		}},
	}
	for i, rc := range cases {
		f, err := b.restart(ctx, kube, rc, i, say)
		if err != nil {
			return fmt.Errorf("restart %s: %w", rc.what, err)
		}
		fmt.Fprintln(out, f.result())
	}
	return nil
}

// restartCM kills c's controller manager and starts it again, waits until
// it holds its Lease and returns when.
func (b *restartBed) restartCM(ctx context.Context, c *testbed.Cluster, cm *ferryProcess, say func(string, ...any)) (time.Time, string, *ferryProcess, error) {
	key := types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-controller-manager"}
	var lease coordinationv1.Lease
	if err := c.Client.Get(ctx, key, &lease); err != nil {
		return time.Time{}, "", nil, fmt.Errorf("read the Lease %s of %s: %w", key, c.Name, err)
	}
	holder := ptrString(lease.Spec.HolderIdentity)
	say("SIGKILL to ferry-controller-manager of %s (pid %d, Lease held by %s)", c.Name, cm.PID(), holder)
	if err := cm.Kill(); err != nil {
		return time.Time{}, "", nil, err
	}
	if err := cm.Start(ctx); err != nil {
		return time.Time{}, "", nil, err
	}
	var leaseAt time.Time
	err := poll(ctx, restartTimeout, "the new controller manager of "+c.Name+" to hold its Lease", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, key, &lease); err != nil {
			return false, err
		}
		now := ptrString(lease.Spec.HolderIdentity)
		if now != "" && now != holder {
			leaseAt = time.Now()
			return true, nil
		}
		return false, nil
	})
	return leaseAt, "", cm, err
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// restart runs one restart case and measures it.
func (b *restartBed) restart(ctx context.Context, kube kubernetes.Interface, rc restartCase, n int, say func(string, ...any)) (restartFigures, error) {
	f := restartFigures{what: rc.what, pods: b.pods}
	before, err := b.snapshot(ctx, false)
	if err != nil {
		return f, err
	}
	oldVKs := b.consumerCM.VirtualKubeletPIDs()
	// The virtual kubelets' memory over the restart, also of those that
	// live through it.
	samplers := map[int]*memorySampler{}
	for _, pid := range oldVKs {
		if m, err := sampleMemory(pid, memorySamplePeriod); err == nil {
			samplers[pid] = m
		}
	}
	reqBefore, err := b.scrapeAll(ctx)
	if err != nil {
		return f, err
	}
	exitsBefore := b.exits()
	kill := time.Now()
	ready, restartedAPI, cm, err := rc.act(ctx)
	if err != nil {
		return f, err
	}
	from := kill
	if !ready.IsZero() {
		from = ready
	}
	if rc.lease {
		f.leaseWait = ready.Sub(kill)
		say("%s: the new controller manager took the Lease %.1fs after the kill", rc.what, f.leaseWait.Seconds())
	}
	// A pod created once the convergence begins runs once ferry works
	// again.
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: probePrefix + strconv.Itoa(n), Namespace: b.namespaces[0]}, Spec: offloadedPodSpec()}
	if _, err := kube.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return f, fmt.Errorf("create pod %s/%s: %w", probe.Namespace, probe.Name, err)
	}
	err = poll(ctx, restartTimeout, rc.what+": the probe pod Running, every controller manager and virtual kubelet back", func(ctx context.Context) (bool, error) {
		for _, cm := range b.cms() {
			if cm.PID() == 0 {
				return false, nil
			}
		}
		vks := b.consumerCM.VirtualKubeletPIDs()
		if len(vks) < len(b.providers) {
			return false, nil
		}
		if rc.what == "vk" && vks[peering.VirtualNodeName(scaleProviderID(1))] == oldVKs[peering.VirtualNodeName(scaleProviderID(1))] {
			return false, nil
		}
		p, err := kube.CoreV1().Pods(probe.Namespace).Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return runningAndReady(p), nil
	})
	if err != nil {
		return f, err
	}
	f.probe = time.Since(from)
	// Then every pod Running and Ready again (the virtual kubelet marks
	// them not ready while it cannot see the provider): LISTs of the
	// consumer's pods, one per namespace, left out of the counts below.
	var ownLists int64
	// Every 2s: each poll lists them all.
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, restartTimeout, true, func(ctx context.Context) (bool, error) {
		ownLists += int64(len(b.namespaces))
		s, err := b.snapshot(ctx, true)
		return err == nil && s.notReady == 0, err
	})
	if err != nil {
		return f, fmt.Errorf("waiting for every offloaded pod Running and Ready again: %w", err)
	}
	f.converge = time.Since(from)
	reqAfter, err := b.scrapeAll(ctx)
	if err != nil {
		return f, err
	}
	for name, after := range reqAfter {
		prior := reqBefore[name]
		if name == restartedAPI {
			prior = nil // its counters began again at its restart
		}
		l, w := listAndWatch(after.minus(prior))
		f.list += l
		f.watch += w
	}
	f.list -= ownLists
	for _, m := range samplers {
		// Sampled over the restart, not since it started (VmHWM): a
		// killed one's samples end with it.
		_, _, _ = m.stop()
		f.rssPeak = max(f.rssPeak, m.maxRSS)
	}
	for _, pid := range b.consumerCM.VirtualKubeletPIDs() {
		if _, ok := samplers[pid]; !ok { // a new one: its peak since it started
			if hwm, err := readStatus(pid, "VmHWM"); err == nil {
				f.rssPeak = max(f.rssPeak, hwm)
			}
		}
	}
	if cm != nil {
		if hwm, err := readStatus(cm.PID(), "VmHWM"); err == nil {
			f.cmRSSPeak = hwm
		}
	}
	after, err := b.snapshot(ctx, false)
	if err != nil {
		return f, err
	}
	f.recreated.consumer, f.lost.consumer = compareUIDs(before.consumer, after.consumer)
	f.recreated.shadow, f.lost.shadow = compareUIDs(before.shadow, after.shadow)
	f.recreated.remote, f.lost.remote = compareUIDs(before.remote, after.remote)
	f.notReady = after.notReady
	f.cmExits = b.exits() - exitsBefore
	f.load = loadAverage()
	say("%s: converged in %.1fs (a new pod ran in %.1fs; lease wait %.1fs); %d LIST and %d WATCH requests; recreated %d, lost %d, not ready %d; virtual kubelet peak %d MiB; controller managers that exited on their own: %d; load %s",
		rc.what, f.converge.Seconds(), f.probe.Seconds(), f.leaseWait.Seconds(), f.list, f.watch, f.recreated.total(), f.lost.total(), f.notReady, f.rssPeak>>20, f.cmExits, f.load)
	return f, nil
}

// readStatus reads a /proc/<pid>/status field, in bytes.
func readStatus(pid int, field string) (int64, error) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	return procStatusBytes(string(status), field)
}

// loadAverage is the 1-minute load average, as uptime shows it.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// runRestartScale is bench-offload-scale -restarts: a consumer and
// opts.Providers providers with ferry-controller-manager as processes,
// opts.Pods pods offloaded over opts.Namespaces namespaces, all Running,
// then runRestarts.
func runRestartScale(ctx context.Context, opts ScaleOptions) (err error) {
	say := progress(opts.Out)
	perProvider := (opts.Pods + opts.Providers - 1) / opts.Providers
	clusterOpts := []testbed.Options{consumerOptions(false)}
	for i := 1; i <= opts.Providers; i++ {
		o := providerOptions(perProvider, false)
		o.Name = string(scaleProviderID(i))
		clusterOpts = append(clusterOpts, o)
	}
	say("starting clusters: consumer and %d providers", opts.Providers)
	pb, err := startPeeredBed(ctx, opts.RepoRoot, clusterOpts, opts.ClusterRead, say)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pb.stop()) }()
	b := &restartBed{consumer: pb.consumer, providers: pb.providers, consumerCM: pb.consumerCM, providerCMs: pb.providerCMs, pods: opts.Pods}
	ids := pb.ids
	for i := range opts.Namespaces {
		ns := fmt.Sprintf("scale-%03d", i)
		if _, err := offloadNamespaceTo(ctx, b.consumer, ns, ids...); err != nil {
			return err
		}
		b.namespaces = append(b.namespaces, ns)
	}
	for _, id := range ids {
		if err := waitVirtualNodeRoomOf(ctx, b.consumer, peering.VirtualNodeName(id), perProvider); err != nil {
			return err
		}
	}
	if err := b.createPods(ctx, opts.Concurrency, say); err != nil {
		return err
	}
	return runRestarts(ctx, b, opts.Out, say)
}

// createPods creates b.pods offloaded pods over b.namespaces and waits
// until all are Running.
func (b *restartBed) createPods(ctx context.Context, concurrency int, say func(string, ...any)) error {
	say("creating %d pods over %d namespaces", b.pods, len(b.namespaces))
	kube, err := harnessClient(b.consumer)
	if err != nil {
		return err
	}
	tl := newTimeline()
	watchCtx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWatch()
	if !cache.WaitForCacheSync(ctx.Done(), watchPods(watchCtx, &wg, kube, "", "scale-", tl, "", bound, running)) {
		return ctx.Err()
	}
	run := podRun{name: "restarts", cluster: b.consumer, shape: Shape{Name: ShapeBurst, Pods: b.pods, Concurrency: concurrency}}
	createErr := make(chan error, 1)
	go func() {
		createErr <- run.createEach(ctx, b.pods, func(ctx context.Context, i int) error {
			ns := b.namespaces[i%len(b.namespaces)]
			name := fmt.Sprintf("scale-%05d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: offloadedPodSpec()}
			tl.mark(name, created, time.Now())
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
			}
			return nil
		})
	}()
	res := &runResult{name: "restarts", pods: b.pods, stages: []stage{created, bound, running}, timeline: tl}
	if err := run.waitRunning(ctx, res, createErr, say); err != nil {
		return err
	}
	say("all %d pods Running (load %s)", b.pods, loadAverage())
	return nil
}
