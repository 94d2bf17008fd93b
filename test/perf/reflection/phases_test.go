package reflection

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/test/perf/stats"
)

// params size one benchmark run.
type params struct {
	// configMaps, secrets and services are the load, spread over
	// loadNamespaces offloaded namespaces.
	configMaps, secrets, services, loadNamespaces int
	// concurrency is the load's create calls in flight.
	concurrency int
	// updates ConfigMaps are changed, updateRate a second.
	updates    int
	updateRate float64
	// watchNamespaces are the counts of offloaded namespaces the open
	// watches are read with, ascending.
	watchNamespaces []int
	// resync is the ResyncPeriod of the reflection restarted after the
	// updates; its idle phase lasts 2×resync+1s.
	resync time.Duration
	// settle is how long a state must stay unchanged to count as settled.
	settle time.Duration
	// timeout bounds each wait for the reflection.
	timeout time.Duration
}

// benchParams is `make bench-reflection`.
func benchParams() params {
	return params{
		configMaps: 1000, secrets: 1000, services: 200, loadNamespaces: 10, concurrency: 32,
		updates: 200, updateRate: 50,
		watchNamespaces: []int{1, 10, 50},
		resync:          5 * time.Second, settle: 2 * time.Second, timeout: 5 * time.Minute,
	}
}

// shortParams is the variant `go test ./...` runs.
func shortParams() params {
	return params{
		configMaps: 20, secrets: 20, services: 4, loadNamespaces: 2, concurrency: 8,
		updates: 10, updateRate: 50,
		watchNamespaces: []int{1, 3},
		resync:          2 * time.Second, settle: time.Second, timeout: time.Minute,
	}
}

func (p params) objects() int { return p.configMaps + p.secrets + p.services }

// watchCount is the open watches of one run.
type watchCount struct{ consumer, provider int64 }

// measureWatches reads the watches a fresh reflection opens on each cluster
// with each count of offloaded namespaces, in each scope, and checks that
// each run closes them all when it stops.
func (h *harness) measureWatches(ctx context.Context) {
	p := h.p
	locals := namespaceNames("watch", p.watchNamespaces[len(p.watchNamespaces)-1])
	h.say("watches: creating %d namespaces and their twins", len(locals))
	if err := h.createNamespaces(ctx, locals); err != nil {
		h.tb.Fatal(err)
	}
	counts := map[remotescope.Scope][]watchCount{}
	offloaded := 0
	for _, n := range p.watchNamespaces {
		if err := h.offload(ctx, locals[offloaded:n]); err != nil {
			h.tb.Fatal(err)
		}
		offloaded = n
		for _, scope := range scopes {
			start := time.Now()
			r := h.startReflection(ctx, scope, 0)
			if err := h.waitReady(ctx, r, locals[:n]); err != nil {
				h.tb.Error(err)
				h.stopAndCheck(ctx, r)
				return
			}
			c := watchCount{r.consumer.openWatches(), r.provider.openWatches()}
			counts[scope] = append(counts[scope], c)
			h.say("watches: %s scope, %d offloaded namespaces: consumer %d, provider %d (peak %d); ready in %.1fs; requests consumer: %v; provider: %v",
				scope, n, c.consumer, c.provider, r.provider.peakWatches(), time.Since(start).Seconds(), r.consumer.counts(), r.provider.counts())
			h.result("watches scope=%s ns=%d consumer=%d provider=%d", scope, n, c.consumer, c.provider)
			h.stopAndCheck(ctx, r)
		}
	}
	if err := h.unoffload(ctx, locals); err != nil {
		h.tb.Fatal(err)
	}
	for _, scope := range scopes {
		var parts []string
		constant := true
		for i, c := range counts[scope] {
			parts = append(parts, fmt.Sprintf("%d:%d", p.watchNamespaces[i], c.provider))
			constant = constant && c == counts[scope][0]
		}
		if scope == remotescope.Cluster {
			h.target("watches_constant scope=cluster", "(same for every namespace count)", constant, strings.Join(parts, " "))
		}
	}
}

// measureLoad offloads fresh namespaces, starts the reflection in scope
// and, once it is synced, measures creating the load and updating
// ConfigMaps; then it restarts the reflection with a short resync period and
// measures its first sync and an idle period with resyncs.
func (h *harness) measureLoad(ctx context.Context, scope remotescope.Scope) {
	p := h.p
	locals := namespaceNames("load-"+scopeTag(scope), p.loadNamespaces)
	if err := h.createNamespaces(ctx, locals); err != nil {
		h.tb.Fatal(err)
	}
	if err := h.offload(ctx, locals); err != nil {
		h.tb.Fatal(err)
	}
	defer func() {
		if err := h.unoffload(ctx, locals); err != nil {
			h.tb.Error(err)
		}
	}()
	defer h.reportEvents(ctx, locals)
	// The default resync period (10 minutes): no resync disturbs the
	// creations and updates.
	r := h.startReflection(ctx, scope, 0)
	if err := h.waitReady(ctx, r, locals); err != nil {
		h.tb.Error(err)
		h.stopAndCheck(ctx, r)
		return
	}
	if err := h.waitQuiet(ctx, r); err != nil {
		h.tb.Error(err)
		h.stopAndCheck(ctx, r)
		return
	}
	ok := h.reflectLoad(ctx, r, locals) && h.updateConfigMaps(ctx, r, locals)
	h.stopAndCheck(ctx, r)
	if !ok {
		return
	}
	// A restart, as of the virtual kubelet, with a short resync period.
	r = h.startReflection(ctx, scope, p.resync)
	defer h.stopAndCheck(ctx, r)
	if h.restart(ctx, r, p.objects()+len(locals)) {
		h.idleResync(ctx, r, p.objects()+len(locals))
	}
}

// restart times a fresh reflection's first sync of every object already
// reflected, from its start to its last request or sync, and counts its
// writes (target: none).
func (h *harness) restart(ctx context.Context, r *reflectionRun, objects int) bool {
	start := time.Now()
	err := r.poll(ctx, h.p.timeout, fmt.Sprintf("the restarted reflection to sync all %d objects", objects), func() bool {
		return r.metric(metricSyncs) >= float64(objects)
	})
	if err != nil {
		h.tb.Errorf("%v: %.0f synced", err, r.metric(metricSyncs))
		return false
	}
	last, err := h.quiet(ctx, r)
	if err != nil {
		h.tb.Error(err)
		return false
	}
	synced := last.Sub(start)
	c, p := r.consumer.counts(), r.provider.counts()
	h.say("restart (%s scope): every object synced, the last %.1fs after the start; syncs: %s; requests to the provider: %v; to the consumer: %v; writes by kind: %s",
		r.scope, synced.Seconds(), r.breakdown(metricSyncs), p, c, r.breakdown(metricWrites))
	h.result("writes_restart=%d scope=%s restart_sync_seconds=%.2f objects=%d consumer_writes=%d", p.mutating(), r.scope, synced.Seconds(), objects, c.mutating())
	h.target("writes_restart scope="+string(r.scope), "== 0", p.mutating() == 0, fmt.Sprint(p.mutating()))
	return true
}

// reportEvents prints the events of the consumer namespaces: those the
// reflection recorded (a refused copy) and those it brought back from the
// provider.
func (h *harness) reportEvents(ctx context.Context, locals []string) {
	var lines []string
	for _, ns := range locals {
		evs, err := h.consumer.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			h.tb.Error(err)
			return
		}
		for _, e := range evs.Items {
			lines = append(lines, fmt.Sprintf("%s/%s %s %s %s/%s (source %s, labels %v): %s",
				ns, e.Name, e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Source.Component, e.Labels, e.Message))
		}
	}
	if len(lines) > 0 {
		h.say("events in the consumer's load namespaces (%d):\n  %s", len(lines), strings.Join(lines[:min(len(lines), 10)], "\n  "))
	}
}

// loadObjects are the load's objects, kinds interleaved, spread over
// namespaces.
func (p params) loadObjects(namespaces []string) []object {
	var objs []object
	for i := range max(p.configMaps, p.secrets, p.services) {
		ns := namespaces[i%len(namespaces)]
		if i < p.configMaps {
			objs = append(objs, object{kindConfigMap, ns, fmt.Sprintf("cm-%04d", i)})
		}
		if i < p.secrets {
			objs = append(objs, object{kindSecret, ns, fmt.Sprintf("secret-%04d", i)})
		}
		if i < p.services {
			objs = append(objs, object{kindService, ns, fmt.Sprintf("svc-%04d", i)})
		}
	}
	return objs
}

// create creates one object of the load in the consumer.
func (h *harness) create(ctx context.Context, o object) error {
	meta := metav1.ObjectMeta{Name: o.name, Namespace: o.namespace, Labels: map[string]string{"app": "bench", "bench/object": o.name},
		Annotations: map[string]string{"bench/created": time.Now().Format(time.RFC3339Nano)}}
	core := h.consumer.Kube.CoreV1()
	var err error
	switch o.kind {
	case kindConfigMap:
		_, err = core.ConfigMaps(o.namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{
			stampKey: "created", "app.properties": "listen=8080\nworkers=4\nname=" + o.name + "\n" + strings.Repeat("# padding\n", 20),
		}}, metav1.CreateOptions{})
	case kindSecret:
		_, err = core.Secrets(o.namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{
			"username": []byte("bench"), "password": []byte("s3cr3t-" + o.name), "token": []byte(strings.Repeat("x", 256)),
		}}, metav1.CreateOptions{})
	case kindService:
		_, err = core.Services(o.namespace).Create(ctx, &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": o.name},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
			},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s/%s: %w", o.kind, o.namespace, o.name, err)
	}
	return nil
}

// reflectLoad creates the load and waits until a watch of the provider has
// seen every copy.
func (h *harness) reflectLoad(ctx context.Context, r *reflectionRun, locals []string) bool {
	p := h.p
	objs := p.loadObjects(locals)
	h.say("load (%s scope): creating %d ConfigMaps, %d Secrets and %d Services in %d namespaces, %d calls at a time",
		r.scope, p.configMaps, p.secrets, p.services, len(locals), p.concurrency)
	beforeC, beforeP := r.consumer.counts(), r.provider.counts()
	writesBefore := r.metric(metricWrites)
	start := time.Now()
	if err := parallel(ctx, len(objs), p.concurrency, func(ctx context.Context, i int) error { return h.create(ctx, objs[i]) }); err != nil {
		h.tb.Error(err)
		return false
	}
	created := time.Since(start)
	h.say("load (%s scope): created in %.1fs", r.scope, created.Seconds())
	var last time.Time
	err := r.poll(ctx, p.timeout, fmt.Sprintf("%d objects to be reflected", len(objs)), func() bool {
		var n int
		n, _, last = h.obs.seen(objs)
		return n == len(objs)
	})
	if err != nil {
		n, missing, _ := h.obs.seen(objs)
		h.tb.Errorf("%v: %d of %d reflected; missing %s", err, n, len(objs), sample(missing))
		return false
	}
	all := last.Sub(start)
	// Writes that trail the last copy (a duplicate, a conflict) count too.
	if err := h.waitQuiet(ctx, r); err != nil {
		h.tb.Error(err)
		return false
	}
	dc, dp := r.consumer.counts().minus(beforeC), r.provider.counts().minus(beforeP)
	perObject := float64(dp.mutating()) / float64(len(objs))
	h.say("load (%s scope): all %d reflected %.1fs after the first create call (%.0f objects/s); requests to the provider: %v; to the consumer: %v; ferry_reflection_writes_total +%.0f (%s), errors_total %.0f",
		r.scope, len(objs), all.Seconds(), float64(len(objs))/all.Seconds(), dp, dc, r.metric(metricWrites)-writesBefore, r.breakdown(metricWrites), r.metric(metricErrors))
	h.result("reflect_all_seconds=%.2f objects=%d scope=%s create_calls_seconds=%.2f objects_per_second=%.0f",
		all.Seconds(), len(objs), r.scope, created.Seconds(), float64(len(objs))/all.Seconds())
	h.result("writes_per_object_create=%.3f scope=%s provider_writes=%d consumer_writes=%d", perObject, r.scope, dp.mutating(), dc.mutating())
	h.target("writes_per_object_create scope="+string(r.scope), "<= 1.05", perObject <= 1.05, fmt.Sprintf("%.3f", perObject))
	return true
}

// updateConfigMaps changes one key of p.updates ConfigMaps, p.updateRate a
// second, and times each from its update call's return to a watch of the
// provider seeing the new value.
func (h *harness) updateConfigMaps(ctx context.Context, r *reflectionRun, locals []string) bool {
	p := h.p
	var cms []object
	for _, o := range p.loadObjects(locals) {
		if o.kind == kindConfigMap {
			cms = append(cms, o)
		}
	}
	n := min(p.updates, len(cms))
	step := len(cms) / n
	type update struct {
		object
		stamp           string
		start, returned time.Time
	}
	updates := make([]update, n)
	beforeC, beforeP := r.consumer.counts(), r.provider.counts()
	h.say("updates (%s scope): %d ConfigMaps, %.0f a second", r.scope, n, p.updateRate)
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.updateRate))
	defer tick.Stop()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		<-tick.C
		wg.Go(func() {
			u := &updates[i]
			u.object = cms[i*step]
			u.start = time.Now()
			u.stamp = fmt.Sprintf("%d-%d", i, u.start.UnixNano())
			patch := fmt.Appendf(nil, `{"data":{%q:%q}}`, stampKey, u.stamp)
			_, errs[i] = h.consumer.Kube.CoreV1().ConfigMaps(u.namespace).Patch(ctx, u.name, types.MergePatchType, patch, metav1.PatchOptions{})
			u.returned = time.Now()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			h.tb.Errorf("update a ConfigMap: %v", err)
			return false
		}
	}
	arrived := func() (missing []object) {
		for _, u := range updates {
			if _, ok := h.obs.stampSeen(u.namespace, u.name, u.stamp); !ok {
				missing = append(missing, u.object)
			}
		}
		return missing
	}
	if err := r.poll(ctx, p.timeout, fmt.Sprintf("%d updates to reach the provider", n), func() bool { return len(arrived()) == 0 }); err != nil {
		missing := arrived()
		h.tb.Errorf("%v: %d of %d arrived; missing %s", err, n-len(missing), n, sample(missing))
		return false
	}
	var fromReturn, fromStart []time.Duration
	early := 0
	for _, u := range updates {
		at, _ := h.obs.stampSeen(u.namespace, u.name, u.stamp)
		d := at.Sub(u.returned)
		if d < 0 {
			early++ // the copy was seen before the local update's response came back
			d = 0
		}
		fromReturn = append(fromReturn, d)
		fromStart = append(fromStart, at.Sub(u.start))
	}
	if err := h.waitQuiet(ctx, r); err != nil {
		h.tb.Error(err)
		return false
	}
	dc, dp := r.consumer.counts().minus(beforeC), r.provider.counts().minus(beforeP)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	h.say("updates (%s scope): requests to the provider: %v; to the consumer: %v (the updates themselves go through the harness's client); %d copies seen before the update call returned",
		r.scope, dp, dc, early)
	h.result("update_latency_p50_ms=%.1f p99_ms=%.1f max_ms=%.1f updates=%d scope=%s from_call_start_p50_ms=%.1f from_call_start_p99_ms=%.1f writes_per_update=%.2f",
		ms(stats.Percentile(fromReturn, 50)), ms(stats.Percentile(fromReturn, 99)), ms(stats.Percentile(fromReturn, 100)), n, r.scope,
		ms(stats.Percentile(fromStart, 50)), ms(stats.Percentile(fromStart, 99)), float64(dp.mutating())/float64(n))
	return true
}

// idleResync counts the writes of an idle period of 2×resync+1s, and checks
// that at least one full resync (a sync of every one of objects) happened
// in it.
func (h *harness) idleResync(ctx context.Context, r *reflectionRun, objects int) {
	p := h.p
	if err := h.waitQuiet(ctx, r); err != nil {
		h.tb.Error(err)
		return
	}
	idle := 2*p.resync + time.Second
	h.say("idle (%s scope): %s without changes, resync period %s", r.scope, idle, p.resync)
	beforeC, beforeP := r.consumer.counts(), r.provider.counts()
	syncsBefore := r.metric(metricSyncs)
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		h.tb.Error(ctx.Err())
		return
	}
	if err := r.alive(); err != nil {
		h.tb.Error(err)
		return
	}
	dc, dp := r.consumer.counts().minus(beforeC), r.provider.counts().minus(beforeP)
	syncs := int(r.metric(metricSyncs) - syncsBefore)
	resyncs := syncs / objects
	if resyncs < 1 {
		h.tb.Errorf("idle (%s scope): %d syncs in %s, fewer than the %d objects: no full resync happened", r.scope, syncs, idle, objects)
	}
	h.say("idle (%s scope): %d syncs (%d full resyncs of %d objects); requests to the provider: %v; to the consumer: %v",
		r.scope, syncs, resyncs, objects, dp, dc)
	h.result("writes_idle_resync=%d scope=%s idle_seconds=%.0f resyncs=%d syncs=%d consumer_writes=%d",
		dp.mutating(), r.scope, idle.Seconds(), resyncs, syncs, dc.mutating())
	h.target("writes_idle_resync scope="+string(r.scope), "== 0", dp.mutating() == 0, fmt.Sprint(dp.mutating()))
}
