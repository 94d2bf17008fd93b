package realnodes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/testbed"
)

// readyWatch records when a watch of one namespace first sees each pod
// Ready.
type readyWatch struct {
	mu      sync.Mutex
	readyAt map[string]time.Time
	stop    chan struct{}
}

func watchReady(ctx context.Context, c *testbed.Cluster, namespace string) (*readyWatch, error) {
	w := &readyWatch{readyAt: map[string]time.Time{}, stop: make(chan struct{})}
	f := informers.NewSharedInformerFactoryWithOptions(c.Kube, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || !podReady(p) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.readyAt[p.Name]; !seen {
			w.readyAt[p.Name] = now
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
		return nil, err
	}
	f.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(w.stop)
		return nil, fmt.Errorf("%s: watch pods of %s: not synced", c.Name, namespace)
	}
	return w, nil
}

func (w *readyWatch) at(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.readyAt[name]
	return t, ok
}

func (w *readyWatch) close() { close(w.stop) }

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startPod is the pod the start measurement creates: agnhost's pause, with
// no probe, so Ready is its container started.
func startPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench-start"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "pause", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}},
		},
	}
}

// startOptions of measureStart.
type startOptions struct {
	Pods     int
	Interval time.Duration
	Timeout  time.Duration
	// Namespaces: where offloaded pods are created in the consumer, their
	// twin in the provider, where direct pods are created in the provider.
	Offloaded, Twin, Direct string
}

// measureStart creates opts.Pods pairs, one offloaded pod in the consumer
// and one direct pod in the provider at the same moment, a pair every
// opts.Interval, or with 0 each pair once the one before is Ready (which of
// the two is created first alternates), and times each from its create
// call to Ready.
func measureStart(ctx context.Context, consumer, provider *testbed.Cluster, opts startOptions, log io.Writer) (direct, offload, remote Durations) {
	fail := func(err error) (Durations, Durations, Durations) {
		return Durations{Err: err}, Durations{Err: err}, Durations{Err: err}
	}
	watches := map[string]*readyWatch{}
	for key, w := range map[string]struct {
		c  *testbed.Cluster
		ns string
	}{"offload": {consumer, opts.Offloaded}, "remote": {provider, opts.Twin}, "direct": {provider, opts.Direct}} {
		rw, err := watchReady(ctx, w.c, w.ns)
		if err != nil {
			return fail(err)
		}
		defer rw.close()
		watches[key] = rw
	}
	created := map[string]time.Time{}
	var mu sync.Mutex
	var createErrs []error
	create := func(c *testbed.Cluster, ns, key, name string) {
		p := startPod(name)
		p.Namespace = ns
		start := time.Now()
		if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			mu.Lock()
			createErrs = append(createErrs, fmt.Errorf("%s: create pod %s/%s: %w", c.Name, ns, name, err))
			mu.Unlock()
			return
		}
		mu.Lock()
		created[key+"/"+name] = start
		mu.Unlock()
	}
	names := make([]string, opts.Pods)
	tick := time.NewTicker(max(opts.Interval, time.Millisecond))
	defer tick.Stop()
	for i := range opts.Pods {
		names[i] = fmt.Sprintf("start-%03d", i)
		var wg sync.WaitGroup
		first, second := func() { create(consumer, opts.Offloaded, "offload", names[i]) }, func() { create(provider, opts.Direct, "direct", names[i]) }
		if i%2 == 1 {
			first, second = second, first
		}
		wg.Go(first)
		wg.Go(second)
		wg.Wait()
		switch {
		case i == opts.Pods-1:
		case opts.Interval == 0:
			// Paced: the next pair once this one is Ready, so that no
			// pod waits behind another.
			if err := waitReady(ctx, opts.Timeout, names[i], watches["offload"], watches["direct"]); err != nil {
				return fail(err)
			}
		default:
			select {
			case <-tick.C:
			case <-ctx.Done():
				return fail(ctx.Err())
			}
		}
	}
	if err := errors.Join(createErrs...); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(opts.Timeout)
	for {
		missing := map[string][]string{}
		for _, key := range []string{"offload", "direct", "remote"} {
			for _, n := range names {
				if _, ok := watches[key].at(n); !ok {
					missing[key] = append(missing[key], n)
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			err := fmt.Errorf("not Ready %s after the last create: offloaded %v, their provider pods %v, direct %v",
				opts.Timeout, missing["offload"], missing["remote"], missing["direct"])
			return fail(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range names {
		d, _ := watches["direct"].at(n)
		o, _ := watches["offload"].at(n)
		r, _ := watches["remote"].at(n)
		direct.Samples = append(direct.Samples, d.Sub(created["direct/"+n]))
		offload.Samples = append(offload.Samples, o.Sub(created["offload/"+n]))
		remote.Samples = append(remote.Samples, r.Sub(created["offload/"+n]))
	}
	fmt.Fprintf(log, "start: %d pods each; direct %v\nstart: offloaded %v\n", opts.Pods, rounded(direct.Samples), rounded(offload.Samples))
	return direct, offload, remote
}

func waitReady(ctx context.Context, timeout time.Duration, name string, watches ...*readyWatch) error {
	deadline := time.Now().Add(timeout)
	for {
		ready := true
		for _, w := range watches {
			_, ok := w.at(name)
			ready = ready && ok
		}
		switch {
		case ready:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("pair %s not Ready within %s", name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rounded(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	for i := range out {
		out[i] = out[i].Round(time.Millisecond)
	}
	return out
}
