package reflection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/test/testbed"
	vkreflection "github.com/ferry-io/ferry/virtualkubelet/reflection"
)

const (
	consumerID ferryv1alpha1.ClusterID = "consumer"
	providerID ferryv1alpha1.ClusterID = "provider"
	// nodeName is the virtual node the reflection serves (no pods run on
	// it here).
	nodeName = "ferry-provider"
	// canaryName is the ConfigMap in every offloaded namespace whose copy
	// shows that the namespace's watches have listed.
	canaryName = "canary"
	// stampKey is the ConfigMap key the update phase changes.
	stampKey = "stamp"
)

// scopes are the remote scopes every phase is measured with.
var scopes = []remotescope.Scope{remotescope.Cluster, remotescope.Namespace}

// harness is one benchmark run: the clusters, a watch of the provider's
// copies, and where the lines go.
type harness struct {
	tb                 testing.TB
	p                  params
	consumer, provider *testbed.Cluster
	obs                *observer
	logger             logr.Logger
	logPath            string
	out                func(string)
	begin              time.Time
}

// say prints a progress line.
func (h *harness) say(format string, args ...any) {
	h.out(fmt.Sprintf("[%6.1fs] %s", time.Since(h.begin).Seconds(), fmt.Sprintf(format, args...)))
}

// result prints a RESULT line.
func (h *harness) result(format string, args ...any) {
	h.out("RESULT " + fmt.Sprintf(format, args...))
}

// target prints whether a target is met.
func (h *harness) target(name, want string, met bool, value string) {
	verdict := "met"
	if !met {
		verdict = "MISSED"
	}
	h.out(fmt.Sprintf("target %s %s: %s (%s)", name, want, verdict, value))
}

// startHarness starts the clusters (etcd and kube-apiserver each), installs
// ferry's CRDs in the consumer and starts watching the provider's copies.
func startHarness(tb testing.TB, p params, out func(string)) *harness {
	tb.Helper()
	testbed.RequireBinaries(tb)
	h := &harness{tb: tb, p: p, out: out, begin: time.Now()}
	ctx := tb.Context()
	h.say("starting clusters consumer and provider (etcd + kube-apiserver)")
	clusters, err := testbed.StartClusters(ctx, testbed.Options{Name: string(consumerID)}, testbed.Options{Name: string(providerID)})
	if err != nil {
		tb.Fatal(err)
	}
	h.consumer, h.provider = clusters[0], clusters[1]
	tb.Cleanup(func() {
		for _, c := range clusters {
			if err := c.Stop(); err != nil {
				tb.Error(err)
			}
		}
	})
	if os.Getenv(testbed.EnvKeep) != "" {
		h.say("%s is set: the cluster folders stay: %s %s", testbed.EnvKeep, h.consumer.Dir, h.provider.Dir)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.consumer.ApplyKustomization(ctx, filepath.Join(root, "manifests", "crds")); err != nil {
		tb.Fatal(err)
	}

	h.logPath = filepath.Join(h.consumer.Dir, "reflection.log")
	f, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	closed := false
	h.logger = funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if !closed {
			fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
		}
	}, funcr.Options{Verbosity: 1})
	// client-go's own messages (informers, rate limiter) too.
	klog.SetLogger(h.logger)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("last lines of %s:\n%s", h.logPath, tail(h.logPath, 60))
		}
		mu.Lock()
		defer mu.Unlock()
		closed = true
		_ = f.Close()
	})

	obsCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.obs, err = observe(obsCtx, h.provider.Kube)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		h.obs.factory.Shutdown()
	})
	return h
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// twinOf is the provider namespace standing for local (as ferry's
// DefaultName mapping would name it).
func twinOf(local string) string { return local + "-" + string(consumerID) }

// createNamespaces creates each local namespace in the consumer, its twin in
// the provider and the canary ConfigMap in the local namespace.
func (h *harness) createNamespaces(ctx context.Context, locals []string) error {
	return parallel(ctx, len(locals), 16, func(ctx context.Context, i int) error {
		local := locals[i]
		for _, c := range []struct {
			kube kubernetes.Interface
			name string
		}{{h.consumer.Kube, local}, {h.provider.Kube, twinOf(local)}} {
			if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.name}}, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create namespace %s: %w", c.name, err)
			}
		}
		canary := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: canaryName, Namespace: local}, Data: map[string]string{"canary": "yes"}}
		if _, err := h.consumer.Kube.CoreV1().ConfigMaps(local).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ConfigMap %s/%s: %w", local, canaryName, err)
		}
		return nil
	})
}

// offload creates the NamespaceOffloading of each local namespace and
// writes its status: the twin namespace is Ready in the provider, as ferry's
// controllers would once they made it.
func (h *harness) offload(ctx context.Context, locals []string) error {
	return parallel(ctx, len(locals), 16, func(ctx context.Context, i int) error {
		nso := &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: locals[i]},
			Spec:       ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote},
		}
		if err := h.consumer.Client.Create(ctx, nso); err != nil {
			return fmt.Errorf("create NamespaceOffloading %s/%s: %w", nso.Namespace, nso.Name, err)
		}
		nso.Status = ferryv1alpha1.NamespaceOffloadingStatus{Clusters: []ferryv1alpha1.ClusterOffloadingStatus{{
			ClusterID: providerID, TwinNamespace: twinOf(locals[i]), Phase: ferryv1alpha1.OffloadingReady,
		}}}
		if err := h.consumer.Client.Status().Update(ctx, nso); err != nil {
			return fmt.Errorf("write the status of NamespaceOffloading %s/%s: %w", nso.Namespace, nso.Name, err)
		}
		return nil
	})
}

// unoffload deletes the NamespaceOffloadings of locals: the reflection stops
// reflecting them (their copies stay).
func (h *harness) unoffload(ctx context.Context, locals []string) error {
	return parallel(ctx, len(locals), 16, func(ctx context.Context, i int) error {
		nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: locals[i]}}
		return client.IgnoreNotFound(h.consumer.Client.Delete(ctx, nso))
	})
}

// parallel runs f for 0..n-1, at most limit at once, and returns the first
// error (the others are not started once one failed).
func parallel(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// reflectionRun is one reflection.Run, with its own request counters and
// metrics registry.
type reflectionRun struct {
	scope              remotescope.Scope
	consumer, provider *requestCounter
	registry           *prometheus.Registry
	cancel             context.CancelFunc
	exited             chan struct{}
	err                error
	stopOnce           sync.Once
	stopErr            error
}

// startReflection starts reflection.Run in-process, as the virtual kubelet
// does, with the admin credentials of both clusters behind counting
// transports.
func (h *harness) startReflection(ctx context.Context, scope remotescope.Scope, resync time.Duration) *reflectionRun {
	r := &reflectionRun{
		scope: scope, consumer: newRequestCounter(), provider: newRequestCounter(),
		registry: prometheus.NewRegistry(), exited: make(chan struct{}),
	}
	local, remote := rest.CopyConfig(h.consumer.Config), rest.CopyConfig(h.provider.Config)
	local.Wrap(r.consumer.wrap)
	remote.Wrap(r.provider.wrap)
	runCtx, cancel := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), h.logger.WithValues("scope", scope)))
	r.cancel = cancel
	go func() {
		defer close(r.exited)
		r.err = vkreflection.Run(runCtx, vkreflection.Config{
			Local: local, Provider: remote, NodeName: nodeName,
			ConsumerClusterID: consumerID, ProviderClusterID: providerID, RemoteScope: scope,
			Options:  vkreflection.Options{ResyncPeriod: resync},
			Registry: r.registry,
		})
	}()
	h.tb.Cleanup(func() { _ = r.stop() })
	return r
}

// alive fails when Run returned.
func (r *reflectionRun) alive() error {
	select {
	case <-r.exited:
		return fmt.Errorf("reflection.Run returned early: %v", r.err)
	default:
		return nil
	}
}

// stop ends Run and waits for it to return.
func (r *reflectionRun) stop() error {
	r.stopOnce.Do(func() {
		r.cancel()
		select {
		case <-r.exited:
			r.stopErr = r.err
		case <-time.After(time.Minute):
			r.stopErr = errors.New("reflection.Run did not return within a minute of its context's end")
		}
	})
	return r.stopErr
}

// metric sums the series of a reflection metric whose labels include
// labels (pairs of name and value): counters' and gauges' values,
// histograms' sample counts.
func (r *reflectionRun) metric(name string, labels ...string) float64 {
	families, err := r.registry.Gather()
	if err != nil {
		return -1
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !hasLabel(m, labels[i], labels[i+1]) {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

// breakdown lists the non-zero series of a reflection metric by their
// label values: "configmaps/create 1000, secrets/create 1000".
func (r *reflectionRun) breakdown(name string) string {
	families, err := r.registry.Gather()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Histogram != nil:
				v = float64(m.Histogram.GetSampleCount())
			}
			if v == 0 {
				continue
			}
			values := make([]string, 0, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			parts = append(parts, fmt.Sprintf("%s %.0f", strings.Join(values, "/"), v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

const (
	metricSyncs  = "ferry_reflection_sync_duration_seconds"
	metricWrites = "ferry_reflection_writes_total"
	metricErrors = "ferry_reflection_errors_total"
)

// poll checks done every 100ms until it holds, for at most timeout, and
// fails early when Run returned.
func (r *reflectionRun) poll(ctx context.Context, timeout time.Duration, what string, done func() bool) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if err := r.alive(); err != nil {
			return false, err
		}
		return done(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s (%s scope): %w", what, r.scope, err)
	}
	return nil
}

// waitReady waits until the reflection wrote a new value of the canary of
// every offloaded namespace (so every twin namespace's watches listed: a
// sync writes nothing before) and the open watches stay unchanged for
// settle. It changes the canaries for that: a write per namespace.
//
// (The ferry_reflection_items gauge would say it without writes, but it can
// stay behind after concurrent syncs until the next resync: see setItem.)
func (h *harness) waitReady(ctx context.Context, r *reflectionRun, locals []string) error {
	stamp := fmt.Sprintf("run-%d", time.Now().UnixNano())
	patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, stampKey, stamp)
	for _, ns := range locals {
		if _, err := h.consumer.Kube.CoreV1().ConfigMaps(ns).Patch(ctx, canaryName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("change ConfigMap %s/%s: %w", ns, canaryName, err)
		}
	}
	if err := r.poll(ctx, h.p.timeout, fmt.Sprintf("the %d canary ConfigMaps to be reflected", len(locals)), func() bool {
		for _, ns := range locals {
			if _, ok := h.obs.stampSeen(ns, canaryName, stamp); !ok {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	_, err := h.waitSteady(ctx, r, "open watches to settle", func() string {
		return fmt.Sprint(r.consumer.openWatches(), r.provider.openWatches())
	})
	return err
}

// waitQuiet waits until the run sends no request but watches, and syncs
// nothing, for settle.
func (h *harness) waitQuiet(ctx context.Context, r *reflectionRun) error {
	_, err := h.quiet(ctx, r)
	return err
}

// quiet waits until the run sends no request but watches, and syncs
// nothing, for settle, and returns when it last did.
func (h *harness) quiet(ctx context.Context, r *reflectionRun) (time.Time, error) {
	return h.waitSteady(ctx, r, "the reflection to be idle", func() string {
		c, p := r.consumer.counts(), r.provider.counts()
		delete(c, verbWatch)
		delete(p, verbWatch)
		return fmt.Sprint(c, p, r.metric(metricSyncs))
	})
}

// waitSteady waits until state stays the same for settle, and returns when
// it last changed.
func (h *harness) waitSteady(ctx context.Context, r *reflectionRun, what string, state func() string) (time.Time, error) {
	last, since := state(), time.Now()
	err := r.poll(ctx, h.p.timeout, what, func() bool {
		if s := state(); s != last {
			last, since = s, time.Now()
		}
		return time.Since(since) >= h.p.settle
	})
	return since, err
}

// stopAndCheck stops the run and checks that it closed every watch it
// opened.
func (h *harness) stopAndCheck(ctx context.Context, r *reflectionRun) {
	if err := r.stop(); err != nil {
		h.tb.Errorf("reflection (%s scope): %v", r.scope, err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return r.consumer.openWatches() == 0 && r.provider.openWatches() == 0, nil
	})
	if err != nil {
		h.tb.Errorf("reflection (%s scope) returned with watches still open: consumer %d, provider %d",
			r.scope, r.consumer.openWatches(), r.provider.openWatches())
	}
}

// observer watches the provider's copies (ferry's origin label) with the
// harness's own client, and keeps when each was first seen, and when each
// stamp of a ConfigMap was.
type observer struct {
	factory informers.SharedInformerFactory

	mu     sync.Mutex
	first  map[string]time.Time // "kind namespace/name"
	stamps map[string]time.Time // "namespace/name stamp"
}

// Kinds the observer watches, as the load creates them.
const (
	kindConfigMap = "configmaps"
	kindSecret    = "secrets"
	kindService   = "services"
)

func observe(ctx context.Context, kube kubernetes.Interface) (*observer, error) {
	o := &observer{first: map[string]time.Time{}, stamps: map[string]time.Time{}}
	o.factory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.LabelSelector = ferryv1alpha1.LabelOriginCluster + "=" + string(consumerID)
	}))
	var synced []cache.InformerSynced
	for kind, inf := range map[string]cache.SharedIndexInformer{
		kindConfigMap: o.factory.Core().V1().ConfigMaps().Informer(),
		kindSecret:    o.factory.Core().V1().Secrets().Informer(),
		kindService:   o.factory.Core().V1().Services().Informer(),
	} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { o.saw(kind, obj) },
			UpdateFunc: func(_, obj any) { o.saw(kind, obj) },
		}); err != nil {
			return nil, err
		}
		synced = append(synced, inf.HasSynced)
	}
	o.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, errors.New("the provider watch of the harness did not sync")
	}
	return o, nil
}

func (o *observer) saw(kind string, obj any) {
	now := time.Now()
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.first[kind+" "+key]; !ok {
		o.first[kind+" "+key] = now
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Data[stampKey] != "" {
		if _, ok := o.stamps[key+" "+cm.Data[stampKey]]; !ok {
			o.stamps[key+" "+cm.Data[stampKey]] = now
		}
	}
}

// object is one object of the load, by its local name.
type object struct {
	kind, namespace, name string
}

// seen tells which of objs have a copy on the provider, and the latest time
// one was first seen.
func (o *observer) seen(objs []object) (n int, missing []object, last time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, obj := range objs {
		t, ok := o.first[obj.kind+" "+twinOf(obj.namespace)+"/"+obj.name]
		if !ok {
			missing = append(missing, obj)
			continue
		}
		n++
		if t.After(last) {
			last = t
		}
	}
	return n, missing, last
}

// stampSeen is when the copy of the local ConfigMap namespace/name was first
// seen with stamp.
func (o *observer) stampSeen(namespace, name, stamp string) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.stamps[twinOf(namespace)+"/"+name+" "+stamp]
	return t, ok
}

// sample lists a few objects, for error messages.
func sample(objs []object) string {
	parts := make([]string, 0, 5)
	for _, o := range objs[:min(len(objs), 5)] {
		parts = append(parts, o.kind+" "+o.namespace+"/"+o.name)
	}
	if len(objs) > 5 {
		parts = append(parts, fmt.Sprintf("and %d more", len(objs)-5))
	}
	return strings.Join(parts, ", ")
}

// namespaceNames are prefix-00, prefix-01, ... (n of them).
func namespaceNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// scopeTag is a short name of a scope for namespace names.
func scopeTag(s remotescope.Scope) string {
	return map[remotescope.Scope]string{remotescope.Cluster: "cl", remotescope.Namespace: "ns"}[s]
}
