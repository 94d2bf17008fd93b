// Package webhook measures what placing pods costs pod creation (`make
// bench-webhook`): on one test-bed cluster with ferry-webhook running, pods
// are created at a fixed concurrency in a namespace ferry ignores and in an
// offloaded namespace per placement measured: one placed by ferry-webhook's
// pod webhook, one by the admission policies in the API server (each
// placement is bound to its namespace alone), alternating in rounds so all
// see the same machine, and the RESULT line compares them.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/perf/profile"
	"github.com/ferry-io/ferry/test/perf/stats"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/binaries"
	"github.com/ferry-io/ferry/webhooks"
)

// Options of a run.
type Options struct {
	// Pods created in each namespace, over all rounds.
	Pods int
	// Concurrency is the create calls in flight at once.
	Concurrency int
	// Rounds alternate the namespaces.
	Rounds int
	// Placements measured (localwebhook.PlacementWebhook, PlacementPolicy).
	Placements []localwebhook.Placement
	// CPUProfile, when set, is where a CPU profile of this process (the
	// webhook and the load generator) over the measured rounds is written.
	CPUProfile string
	// RepoRoot holds manifests/.
	RepoRoot string
	// Out receives progress lines and, last, the RESULT line.
	Out io.Writer
}

func (o Options) validate() error {
	switch {
	case o.Pods < 1:
		return fmt.Errorf("-pods %d: must be at least 1", o.Pods)
	case o.Concurrency < 1:
		return fmt.Errorf("-concurrency %d: must be at least 1", o.Concurrency)
	case o.Rounds < 1 || o.Rounds > o.Pods:
		return fmt.Errorf("-rounds %d: must be within 1 and -pods (%d)", o.Rounds, o.Pods)
	case len(o.Placements) == 0:
		return fmt.Errorf("-placement: none given")
	}
	return nil
}

const plainNamespace = "bench-plain"

// placedNamespace is the offloaded namespace whose pods placement places.
func placedNamespace(p localwebhook.Placement) string { return "bench-" + string(p) }

// labelPlacement, on a namespace, binds it to one placement: the benchmark
// narrows the pod webhook's and the policies' namespace selectors by it.
const labelPlacement = "bench.ferry.io/placement"

// Run starts the cluster and the webhook, measures, prints RESULT and
// stops everything it started.
func Run(ctx context.Context, opts Options) (err error) {
	if err := opts.validate(); err != nil {
		return err
	}
	begin := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(opts.Out, "[%6.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}
	say("starting a test-bed cluster (etcd + kube-apiserver)")
	clusters, err := testbed.StartClusters(ctx, testbed.Options{Name: "bench-webhook"})
	if err != nil {
		return err
	}
	c := clusters[0]
	defer func() { err = errors.Join(err, c.Stop()) }()
	if err := c.ApplyKustomization(ctx, filepath.Join(opts.RepoRoot, "manifests", "base")); err != nil {
		return err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 5000, 10000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := prepare(ctx, c, kube, opts.Placements); err != nil {
		return err
	}
	say("starting ferry-webhook on 127.0.0.1; placements measured: %v", opts.Placements)
	stop, err := localwebhook.RunAdmission(ctx, c.Config, c.Client, func(baseURL string) (*localwebhook.Admission, error) {
		return benchAdmission(opts.RepoRoot, baseURL, opts.Placements)
	})
	if err != nil {
		return err
	}
	defer stop()
	namespaces := []string{plainNamespace}
	for _, p := range opts.Placements {
		if err := localwebhook.WaitPlaced(ctx, c.Client, placedNamespace(p), time.Minute); err != nil {
			return err
		}
		namespaces = append(namespaces, placedNamespace(p))
	}

	warm := min(opts.Pods, 100)
	for _, ns := range namespaces {
		if _, _, err := createPods(ctx, kube, ns, "warm", warm, opts.Concurrency); err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
	}
	pids := c.PIDs()
	pids[harnessProcess] = os.Getpid()
	meter, err := newCPUMeter(pids)
	if err != nil {
		return err
	}
	if opts.CPUProfile != "" {
		stopProfile, err := profile.StartCPU(opts.CPUProfile)
		if err != nil {
			return err
		}
		defer stopProfile()
	}
	runs := make([]runStats, len(namespaces))
	per := opts.Pods / opts.Rounds
	for round := range opts.Rounds {
		n := per
		if round == opts.Rounds-1 {
			n = opts.Pods - per*(opts.Rounds-1)
		}
		// Each round starts with another namespace.
		for k := range namespaces {
			i := (round + k) % len(namespaces)
			if _, err := meter.lap(); err != nil {
				return err
			}
			lat, wall, err := createPods(ctx, kube, namespaces[i], fmt.Sprintf("r%d", round), n, opts.Concurrency)
			if err != nil {
				return err
			}
			lap, err := meter.lap()
			if err != nil {
				return err
			}
			runs[i].addCPU(lap)
			runs[i].latencies = append(runs[i].latencies, lat...)
			runs[i].wall += wall
		}
		say("round %d/%d: %d pods in each namespace", round+1, opts.Rounds, n)
	}
	if err := checkPlaced(ctx, kube, opts.Placements); err != nil {
		return err
	}
	durations, err := webhookDurations(ctx, kube)
	if err != nil {
		return err
	}
	for path, d := range handlerDurations() {
		durations["handler "+path] = d
	}
	names := slices.Sorted(maps.Keys(durations))
	for _, name := range names {
		say("time per call of webhook %s: mean %.2fms", name, ms(durations[name]))
	}
	for _, name := range slices.Sorted(maps.Keys(pids)) {
		line := fmt.Sprintf("CPU per pod of %s: unplaced %.3fms", name, ms(runs[0].cpu[name])/float64(opts.Pods))
		for i, p := range opts.Placements {
			line += fmt.Sprintf(", %s %.3fms", p, ms(runs[i+1].cpu[name])/float64(opts.Pods))
		}
		say("%s", line)
	}
	res := Result{Pods: opts.Pods, Concurrency: opts.Concurrency, Main: opts.Placements[0], Plain: runs[0].stats(opts.Pods),
		Placed: map[localwebhook.Placement]RunStats{}}
	for i, p := range opts.Placements {
		res.Placed[p] = runs[i+1].stats(opts.Pods)
		if p == localwebhook.DefaultPlacement {
			res.Main = p
		}
	}
	res.Print(opts.Out)
	if os.Getenv(testbed.EnvKeep) != "" {
		say("cluster folder kept: %s", c.Dir)
	}
	return nil
}

// harnessProcess names this process in CPU figures: ferry-webhook runs in
// it, and so does the load generator.
const harnessProcess = "ferry-webhook+harness"

// benchAdmission is the webhook configurations and, when measured, the
// admission policies, with the pod webhook bound to the webhook placement's
// namespace alone and the policies to the policy placement's: each
// placement places only its own namespace's pods.
func benchAdmission(repoRoot, baseURL string, placements []localwebhook.Placement) (*localwebhook.Admission, error) {
	a, err := localwebhook.Load(repoRoot, baseURL, localwebhook.PlacementWebhook)
	if err != nil {
		return nil, err
	}
	only := func(sel *metav1.LabelSelector, p localwebhook.Placement) *metav1.LabelSelector {
		sel = sel.DeepCopy()
		if sel == nil {
			sel = &metav1.LabelSelector{}
		}
		if sel.MatchLabels == nil {
			sel.MatchLabels = map[string]string{}
		}
		sel.MatchLabels[labelPlacement] = string(p)
		return sel
	}
	for i, w := range a.Mutating.Webhooks {
		if w.Name == "pods.mutate.ferry.io" {
			a.Mutating.Webhooks[i].NamespaceSelector = only(w.NamespaceSelector, localwebhook.PlacementWebhook)
		}
	}
	if !slices.Contains(placements, localwebhook.PlacementPolicy) {
		return a, nil
	}
	if a.Policies, err = localwebhook.Policies(repoRoot); err != nil {
		return nil, err
	}
	for _, obj := range a.Policies {
		switch b := obj.(type) {
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			b.Spec.MatchResources.NamespaceSelector = only(b.Spec.MatchResources.NamespaceSelector, localwebhook.PlacementPolicy)
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			b.Spec.MatchResources.NamespaceSelector = only(b.Spec.MatchResources.NamespaceSelector, localwebhook.PlacementPolicy)
		}
	}
	return a, nil
}

// prepare makes the namespaces (with their default ServiceAccount: no
// controller manager runs) and offloads one per placement as the
// NamespaceOffloading controller would have: the label ferry selects on,
// and a Remote NamespaceOffloading.
func prepare(ctx context.Context, c *testbed.Cluster, kube kubernetes.Interface, placements []localwebhook.Placement) error {
	namespaces := map[string]map[string]string{plainNamespace: nil}
	for _, p := range placements {
		namespaces[placedNamespace(p)] = map[string]string{ferryv1alpha1.LabelOffloadingEnabled: "true", labelPlacement: string(p)}
	}
	for ns, labels := range namespaces {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ServiceAccount %s/default: %w", ns, err)
		}
		if labels == nil {
			continue
		}
		nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
			Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote}}
		if err := c.Client.Create(ctx, nso); err != nil {
			return fmt.Errorf("create NamespaceOffloading %s/%s: %w", ns, nso.Name, err)
		}
	}
	return nil
}

// createPods creates n pods in ns, concurrency at a time, and returns each
// create call's latency and the wall time of the whole batch.
func createPods(ctx context.Context, kube kubernetes.Interface, ns, prefix string, n, concurrency int) ([]time.Duration, time.Duration, error) {
	latencies := make([]time.Duration, n)
	next := make(chan int)
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				pod := benchPod(fmt.Sprintf("%s-%d", prefix, i))
				t := time.Now()
				if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
					return
				}
				latencies[i] = time.Since(t)
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	wall := time.Since(start)
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return latencies, wall, err
}

// benchPod is an ordinary pod; its ferry.io annotation makes the placement
// validate one.
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"},
			Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingRemote)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
	}
}

// checkPlaced makes sure each measured placement did act: a pod of each
// offloaded namespace carries the policy and one of the other does not.
func checkPlaced(ctx context.Context, kube kubernetes.Interface, placements []localwebhook.Placement) error {
	want := map[string]bool{plainNamespace: false}
	for _, p := range placements {
		want[placedNamespace(p)] = true
	}
	for ns, want := range want {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, "warm-0", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read pod %s/warm-0: %w", ns, err)
		}
		if _, got := pod.Annotations[webhooks.AnnotationAppliedPolicy]; got != want {
			return fmt.Errorf("pod %s/%s: placed = %v, want %v: the benchmark did not measure what it says", ns, pod.Name, got, want)
		}
	}
	return nil
}

type runStats struct {
	latencies []time.Duration
	wall      time.Duration
	// cpu is the CPU time each process used while this namespace's pods
	// were created.
	cpu map[string]time.Duration
}

func (s *runStats) addCPU(lap map[string]time.Duration) {
	if s.cpu == nil {
		s.cpu = map[string]time.Duration{}
	}
	for name, d := range lap {
		s.cpu[name] += d
	}
}

// stats are the create calls' figures and the CPU per pod of the API server
// and this process, over pods.
func (s runStats) stats(pods int) RunStats {
	return RunStats{
		P50: stats.Percentile(s.latencies, 50), P99: stats.Percentile(s.latencies, 99),
		Throughput:   float64(len(s.latencies)) / s.wall.Seconds(),
		APIServerCPU: s.cpu[binaries.KubeAPIServer] / time.Duration(pods),
		HarnessCPU:   s.cpu[harnessProcess] / time.Duration(pods),
	}
}

// webhookDurations reads, from the API server's metrics, the mean time it
// spent per call of each ferry webhook (its side: encoding, TLS, the
// webhook's answer), by webhook name.
func webhookDurations(ctx context.Context, kube kubernetes.Interface) (map[string]time.Duration, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's metrics: %w", err)
	}
	sums, counts := map[string]float64{}, map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		for suffix, into := range map[string]map[string]float64{"_sum{": sums, "_count{": counts} {
			prefix := "apiserver_admission_webhook_admission_duration_seconds" + suffix
			if !strings.HasPrefix(line, prefix) || !strings.Contains(line, ".ferry.io\"") {
				continue
			}
			labels, value, ok := strings.Cut(strings.TrimPrefix(line, prefix), "} ")
			if !ok {
				continue
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			if err != nil {
				continue
			}
			for _, l := range strings.Split(labels, ",") {
				if name, ok := strings.CutPrefix(l, `name="`); ok {
					into[strings.TrimSuffix(name, `"`)] += v
				}
			}
		}
	}
	out := map[string]time.Duration{}
	for name, n := range counts {
		if n > 0 {
			out[name] = time.Duration(sums[name] / n * float64(time.Second))
		}
	}
	return out, nil
}

// handlerDurations reads, from this process's controller-runtime metrics
// (the webhook runs in it), the mean time its handlers took per path.
func handlerDurations() map[string]time.Duration {
	out := map[string]time.Duration{}
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_latency_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h.GetSampleCount() == 0 {
				continue
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" {
					out[l.GetValue()] = time.Duration(h.GetSampleSum() / float64(h.GetSampleCount()) * float64(time.Second))
				}
			}
		}
	}
	return out
}
