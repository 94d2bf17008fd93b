// Package webhook measures what ferry's admission webhooks cost pod
// creation (`make bench-webhook`): on one test-bed cluster with ferry-webhook
// running, pods are created at a fixed concurrency in a namespace the
// webhooks ignore and in an offloaded one where the pod webhooks (mutating
// and validating) act, alternating in rounds so both see the same machine,
// and the RESULT line compares the two.
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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/perf/stats"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/webhooks"
)

// Options of a run.
type Options struct {
	// Pods created in each namespace, over all rounds.
	Pods int
	// Concurrency is the create calls in flight at once.
	Concurrency int
	// Rounds alternate the two namespaces.
	Rounds int
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
	}
	return nil
}

const (
	plainNamespace  = "bench-plain"
	policyNamespace = "bench-offloaded"
)

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
	if err := prepare(ctx, c, kube); err != nil {
		return err
	}
	say("starting ferry-webhook on 127.0.0.1")
	stop, err := localwebhook.Run(ctx, c.Config, c.Client, opts.RepoRoot)
	if err != nil {
		return err
	}
	defer stop()

	warm := min(opts.Pods, 100)
	for _, ns := range []string{plainNamespace, policyNamespace} {
		if _, _, err := createPods(ctx, kube, ns, "warm", warm, opts.Concurrency); err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
	}
	pids := c.PIDs()
	pids["ferry-webhook+harness"] = os.Getpid()
	meter, err := newCPUMeter(pids)
	if err != nil {
		return err
	}
	var plain, policy runStats
	per := opts.Pods / opts.Rounds
	for round := range opts.Rounds {
		n := per
		if round == opts.Rounds-1 {
			n = opts.Pods - per*(opts.Rounds-1)
		}
		order := []*runStats{&plain, &policy}
		if round%2 == 1 {
			order = []*runStats{&policy, &plain}
		}
		for _, s := range order {
			ns := plainNamespace
			if s == &policy {
				ns = policyNamespace
			}
			if _, err := meter.lap(); err != nil {
				return err
			}
			lat, wall, err := createPods(ctx, kube, ns, fmt.Sprintf("r%d", round), n, opts.Concurrency)
			if err != nil {
				return err
			}
			lap, err := meter.lap()
			if err != nil {
				return err
			}
			s.addCPU(lap)
			s.latencies = append(s.latencies, lat...)
			s.wall += wall
		}
		say("round %d/%d: %d pods in each namespace", round+1, opts.Rounds, n)
	}
	if err := checkMutated(ctx, kube); err != nil {
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
		say("CPU per pod of %s: without the webhooks %.2fms, with them %.2fms", name,
			ms(plain.cpu[name])/float64(opts.Pods), ms(policy.cpu[name])/float64(opts.Pods))
	}
	Result{Pods: opts.Pods, Concurrency: opts.Concurrency, Plain: plain.stats(), Webhook: policy.stats()}.Print(opts.Out)
	if os.Getenv(testbed.EnvKeep) != "" {
		say("cluster folder kept: %s", c.Dir)
	}
	return nil
}

// prepare makes both namespaces (with their default ServiceAccount: no
// controller manager runs) and offloads the second as the NamespaceOffloading
// controller would have: the label the webhooks select on, and a Remote
// NamespaceOffloading.
func prepare(ctx context.Context, c *testbed.Cluster, kube kubernetes.Interface) error {
	for ns, labels := range map[string]map[string]string{
		plainNamespace: nil, policyNamespace: {ferryv1alpha1.LabelOffloadingEnabled: "true"},
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ServiceAccount %s/default: %w", ns, err)
		}
	}
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: policyNamespace},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote}}
	if err := c.Client.Create(ctx, nso); err != nil {
		return fmt.Errorf("create NamespaceOffloading: %w", err)
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

// benchPod is an ordinary pod; its ferry.io annotation makes the validating
// webhook parse one.
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"},
			Annotations: map[string]string{placement.AnnotationPodOffloadingStrategy: string(ferryv1alpha1.PodOffloadingRemote)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}},
	}
}

// checkMutated makes sure the measured webhook did act: a pod of the
// offloaded namespace carries the policy and one of the other does not.
func checkMutated(ctx context.Context, kube kubernetes.Interface) error {
	for ns, want := range map[string]bool{policyNamespace: true, plainNamespace: false} {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, "warm-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, got := pod.Annotations[webhooks.AnnotationAppliedPolicy]; got != want {
			return fmt.Errorf("pod %s/%s: webhook applied = %v, want %v: the benchmark did not measure what it says", ns, pod.Name, got, want)
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

func (s runStats) stats() RunStats {
	return RunStats{
		P50: stats.Percentile(s.latencies, 50), P99: stats.Percentile(s.latencies, 99),
		Throughput: float64(len(s.latencies)) / s.wall.Seconds(),
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
