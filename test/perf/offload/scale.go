package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// ScaleOptions are a scale run's: many pods over many offloaded namespaces
// and several providers, for what grows with them (the virtual kubelets'
// memory and watches).
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

// RunScale starts a consumer and opts.Providers providers with ferry, peers
// each, offloads opts.Namespaces namespaces to all of them, counts the open
// watches with one namespace offloaded and with all, creates opts.Pods pods
// over the namespaces and, once all are Running, prints each virtual
// kubelet's memory per 1000 of its pods, and the RESULT line.
func RunScale(ctx context.Context, opts ScaleOptions) (err error) {
	if err := opts.validate(); err != nil {
		return err
	}
	if opts.Restarts {
		return runRestartScale(ctx, opts)
	}
	say := progress(opts.Out)
	perProvider := (opts.Pods + opts.Providers - 1) / opts.Providers
	clusterOpts := []testbed.Options{consumerOptions(false)}
	for i := 1; i <= opts.Providers; i++ {
		o := providerOptions(perProvider, false)
		o.Name = string(scaleProviderID(i))
		clusterOpts = append(clusterOpts, o)
	}
	say("starting clusters: consumer and %d providers (%d nodes of %d pods each)", opts.Providers, providerNodes, podsPerNode(perProvider))
	clusters, err := testbed.StartClusters(ctx, clusterOpts...)
	if err != nil {
		return err
	}
	consumer, providers := clusters[0], clusters[1:]
	defer func() {
		for _, c := range clusters {
			err = errors.Join(err, c.Stop())
		}
	}()
	vkBinary, cleanup, err := prepareFerry(ctx, clusters, opts.RepoRoot, say)
	if err != nil {
		return err
	}
	defer cleanup()

	kubelets := &peering.ProcessLauncher{Binary: vkBinary, Kubeconfig: consumer.KubeconfigPath, LogDir: consumer.Dir}
	stop, err := startFerry(ctx, consumer, consumerID, kubelets)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	ids := make([]ferryv1alpha1.ClusterID, len(providers))
	for i, p := range providers {
		ids[i] = scaleProviderID(i + 1)
		stop, err := startFerry(ctx, p, ids[i], &peering.ProcessLauncher{Binary: vkBinary, Kubeconfig: p.KubeconfigPath, LogDir: p.Dir})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
		if opts.ClusterRead {
			if err := grantClusterRead(ctx, p); err != nil {
				return err
			}
		}
		say("peering with %s", ids[i])
		if err := peer(ctx, consumer, p); err != nil {
			return err
		}
	}

	namespaces := make([]string, opts.Namespaces)
	// cluster -> open watches with 1 namespace and with all: every watch,
	// and those of one namespace (what grows with twin namespaces).
	watches, nsWatches := map[string][2]float64{}, map[string][2]float64{}
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("scale-%03d", i)
		if _, err := offloadNamespaceTo(ctx, consumer, namespaces[i], ids...); err != nil {
			return err
		}
		if i == 0 || i == len(namespaces)-1 {
			if err := settleWatches(ctx, clusters, watches, nsWatches, min(i, 1)); err != nil {
				return err
			}
		}
		if (i+1)%10 == 0 {
			say("%d namespaces offloaded", i+1)
		}
	}
	if len(namespaces) == 1 {
		for _, m := range []map[string][2]float64{watches, nsWatches} {
			for name, w := range m {
				m[name] = [2]float64{w[0], w[0]}
			}
		}
	}
	for _, id := range ids {
		if err := waitVirtualNodeRoomOf(ctx, consumer, peering.VirtualNodeName(id), perProvider); err != nil {
			return err
		}
	}

	say("creating %d pods over %d namespaces, %d create calls at a time", opts.Pods, opts.Namespaces, opts.Concurrency)
	kube, err := harnessClient(consumer)
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
	run := podRun{name: "scale", cluster: consumer, shape: Shape{Name: ShapeBurst, Pods: opts.Pods, Concurrency: opts.Concurrency}}
	createErr := make(chan error, 1)
	go func() {
		createErr <- run.createEach(ctx, opts.Pods, func(ctx context.Context, i int) error {
			ns := namespaces[i%len(namespaces)]
			name := fmt.Sprintf("scale-%05d", i)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench"}}, Spec: offloadedPodSpec()}
			tl.mark(name, created, time.Now())
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s/%s: %w", ns, name, err)
			}
			return nil
		})
	}()
	res := &runResult{name: "scale", pods: opts.Pods, stages: []stage{created, bound, running}, timeline: tl}
	if err := run.waitRunning(ctx, res, createErr, say); err != nil {
		return err
	}
	st := res.stats()
	say("all %d pods Running: p50 %s p99 %s, %.1f pods/s", opts.Pods, ms(st.P50), ms(st.P99), st.Throughput)

	all, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", consumer.Name, err)
	}
	onNode := map[string]int{}
	for _, p := range all.Items {
		onNode[p.Spec.NodeName]++
	}
	var worstPer1000 float64
	for _, id := range ids {
		vn := peering.VirtualNodeName(id)
		m, err := sampleMemory(kubelets.PID(types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: vn}), memorySamplePeriod)
		if err != nil {
			return fmt.Errorf("virtual kubelet of %s: %w", id, err)
		}
		anon, file, err := m.split()
		peak, last, stopErr := m.stop()
		if err = errors.Join(err, stopErr); err != nil {
			return fmt.Errorf("virtual kubelet of %s: %w", id, err)
		}
		pods := onNode[vn]
		per1000 := float64(last) / (1 << 20) / max(1, float64(pods)/1000)
		worstPer1000 = max(worstPer1000, per1000)
		say("virtual kubelet of %s: %d pods, %d MiB resident (%d anonymous, %d mapped files; peak %d), %.0f MiB per 1000 pods",
			id, pods, last>>20, anon>>20, file>>20, peak>>20, per1000)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range watches {
			if !yield(name) {
				return
			}
		}
	})
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
	fmt.Fprintf(opts.Out, "RESULT scale pods=%d namespaces=%d providers=%d cluster_read=%t p50_ms=%.0f p99_ms=%.0f pods_per_s=%.1f vk_rss_mib_per_1000_pods=%.0f %s\n",
		opts.Pods, opts.Namespaces, opts.Providers, opts.ClusterRead, millis(st.P50), millis(st.P99), st.Throughput, worstPer1000, strings.Join(parts, " "))
	return nil
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
