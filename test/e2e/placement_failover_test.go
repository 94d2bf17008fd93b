package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/e2e/framework"
	"github.com/ferry-io/ferry/test/testbed"
	vknode "github.com/ferry-io/ferry/virtualkubelet/node"
)

// cutProxy forwards TCP from 127.0.0.1 to one address until cut: then it
// closes every connection and refuses new ones, as a partition between the
// consumer and the provider would, while the provider runs on.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
}

func startCutProxy(target string) *cutProxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	DeferCleanup(func() { _ = ln.Close(); p.setCut(true) })
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		return
	}
	p.conns[c] = true
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			_ = c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}

func (p *cutProxy) URL() string { return "https://" + p.ln.Addr().String() }

// copies is what one sample saw running: StatefulSet pods by name, and the
// Deployment's pods, per cluster.
type copies struct {
	db  map[string][]string // pod name -> clusters running it
	web map[string]int      // cluster -> running web pods
}

var _ = Describe("Failover and fencing", Label("placement", "chaos", "failover"), Ordered, func() {
	const (
		leaseSeconds, marginSeconds = 8, 4
		dbReplicas, webReplicas     = 2, 2
	)
	var (
		consumer, a, b *testbed.Cluster
		proxy          *cutProxy
		ns, twinA      string
		twinB          string
		virtual        map[string]bool
	)

	podSpec := func() corev1.PodSpec {
		return corev1.PodSpec{
			// Provider A while it is there; anywhere else (local, B) when not.
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}},
			Tolerations:                   []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}},
		}
	}

	running := func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

	// sample lists what runs: on the consumer, pods on its real nodes; on
	// A and B, pods in the twin namespaces. aDown: A is not sampled, its
	// last known pods count as running.
	var lastA []corev1.Pod
	sample := func(ctx context.Context, aDown bool) (copies, error) {
		cp := copies{db: map[string][]string{}, web: map[string]int{}}
		add := func(cluster string, pods []corev1.Pod) {
			for i := range pods {
				p := &pods[i]
				if !running(p) {
					continue
				}
				switch p.Labels["app"] {
				case "db":
					cp.db[p.Name] = append(cp.db[p.Name], cluster)
				case "web":
					cp.web[cluster]++
				}
			}
		}
		var local corev1.PodList
		if err := consumer.Client.List(ctx, &local, client.InNamespace(ns)); err != nil {
			return cp, err
		}
		var onLocal []corev1.Pod
		for _, p := range local.Items {
			if p.Spec.NodeName != "" && !virtual[p.Spec.NodeName] {
				onLocal = append(onLocal, p)
			}
		}
		add("local", onLocal)
		if !aDown {
			var l corev1.PodList
			if err := a.Client.List(ctx, &l, client.InNamespace(twinA)); err != nil {
				return cp, err
			}
			lastA = l.Items
		}
		add("a", lastA)
		var l corev1.PodList
		if err := b.Client.List(ctx, &l, client.InNamespace(twinB)); err != nil {
			return cp, err
		}
		add("b", l.Items)
		return cp, nil
	}
	duplicated := func(cp copies) string {
		var out []string
		for name, at := range cp.db {
			if len(at) > 1 {
				out = append(out, fmt.Sprintf("%s runs in %v", name, at))
			}
		}
		total := 0
		for _, n := range cp.web {
			total += n
		}
		if total > webReplicas {
			out = append(out, fmt.Sprintf("web: %d running (%v), %d replicas", total, cp.web, webReplicas))
		}
		return strings.Join(out, "; ")
	}

	// sampler samples every 200 ms until stopped, and returns the
	// duplicates it saw, with when.
	type sampler struct {
		stop  func() []string
		aDown func(bool)
	}
	startSampler := func(ctx context.Context) sampler {
		var mu sync.Mutex
		var seen []string
		down := false
		done := make(chan struct{})
		stopped := make(chan struct{})
		start := time.Now()
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				mu.Lock()
				d := down
				mu.Unlock()
				if cp, err := sample(ctx, d); err == nil {
					if dup := duplicated(cp); dup != "" {
						mu.Lock()
						seen = append(seen, fmt.Sprintf("at %s: %s", time.Since(start).Round(time.Millisecond), dup))
						mu.Unlock()
					}
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		return sampler{
			stop:  func() []string { close(done); <-stopped; mu.Lock(); defer mu.Unlock(); return seen },
			aDown: func(d bool) { mu.Lock(); down = d; mu.Unlock() },
		}
	}

	// elsewhere: every identity runs exactly once, none on A.
	allElsewhere := func(ctx context.Context, g Gomega) {
		cp, err := sample(ctx, false)
		g.Expect(err).NotTo(HaveOccurred())
		for i := range dbReplicas {
			name := fmt.Sprintf("db-%d", i)
			g.Expect(cp.db[name]).To(HaveLen(1), "%s", name)
			g.Expect(cp.db[name][0]).NotTo(Equal("a"))
		}
		g.Expect(cp.web["a"]).To(BeZero())
		g.Expect(cp.web["local"] + cp.web["b"]).To(Equal(webReplicas))
	}
	allOnA := func(ctx context.Context, g Gomega) {
		cp, err := sample(ctx, false)
		g.Expect(err).NotTo(HaveOccurred())
		for i := range dbReplicas {
			g.Expect(cp.db[fmt.Sprintf("db-%d", i)]).To(Equal([]string{"a"}))
		}
		g.Expect(cp.web).To(Equal(map[string]int{"a": webReplicas}))
		// And every consumer pod Running (on A's virtual node).
		var l corev1.PodList
		g.Expect(consumer.Client.List(ctx, &l, client.InNamespace(ns))).To(Succeed())
		g.Expect(l.Items).To(HaveLen(dbReplicas + webReplicas))
		for _, p := range l.Items {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), p.Name)
		}
	}
	staleGone := func(ctx context.Context, g Gomega) {
		var sps ferryv1alpha1.ShadowPodList
		g.Expect(a.Client.List(ctx, &sps, client.InNamespace(twinA))).To(Succeed())
		g.Expect(sps.Items).To(BeEmpty(), "A's stale ShadowPods")
		var pods corev1.PodList
		g.Expect(a.Client.List(ctx, &pods, client.InNamespace(twinA))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "A's stale pods")
		var node corev1.Node
		g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Name: "ferry-a"}, &node)).To(Succeed())
		for _, t := range node.Spec.Taints {
			g.Expect(t.Key).NotTo(Equal(ferryv1alpha1.TaintOutOfService))
		}
	}
	fenced := func(ctx context.Context) bool {
		var fc ferryv1alpha1.ForeignCluster
		if err := a.Client.Get(ctx, client.ObjectKey{Name: "consumer"}, &fc); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(fc.Status.Conditions, ferryv1alpha1.ForeignClusterFenced)
	}
	consumerSaysOutOfService := func(ctx context.Context) bool {
		var fc ferryv1alpha1.ForeignCluster
		if err := consumer.Client.Get(ctx, client.ObjectKey{Name: "a"}, &fc); err != nil {
			return false
		}
		return meta.IsStatusConditionTrue(fc.Status.Conditions, ferryv1alpha1.ForeignClusterOutOfService)
	}
	// backToA deletes every pod so the scheduler puts them on A again.
	backToA := func(ctx context.Context) {
		GinkgoHelper()
		Expect(consumer.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		Eventually(func(g Gomega) { allOnA(ctx, g) }).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	}

	BeforeAll(func(ctx context.Context) {
		clusters := framework.StartClusters(ctx,
			testbed.Options{Name: "consumer", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "local", Count: 1}}},
			testbed.Options{Name: "a", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
			testbed.Options{Name: "b", ControllerManager: true, Scheduler: true, Kwok: true, Nodes: []testbed.NodePool{{Name: "worker", Count: 1, CPU: "32", Memory: "128Gi", Pods: 110}}},
		)
		consumer, a, b = clusters[0], clusters[1], clusters[2]
		for _, c := range clusters {
			framework.ApplyManifests(ctx, c, "base")
		}
		health := vknode.Options{HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3}
		framework.StartFerry(ctx, consumer, "consumer", framework.FerryOptions{Health: health})
		framework.StartFerry(ctx, a, "a", framework.FerryOptions{Health: health})
		framework.StartFerry(ctx, b, "b", framework.FerryOptions{Health: health})
		u, err := url.Parse(a.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		proxy = startCutProxy(u.Host)
		fencingFlags := []string{"--lease-duration", fmt.Sprintf("%ds", leaseSeconds), "--fencing-margin", fmt.Sprintf("%ds", marginSeconds), "--out-of-service-failover"}
		out, err := ferryctl(ctx, append([]string{"peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", a.KubeconfigPath,
			"--provider-api-server-url", proxy.URL(), "--timeout", "90s"}, fencingFlags...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		out, err = ferryctl(ctx, append([]string{"peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", b.KubeconfigPath, "--timeout", "90s"}, fencingFlags...)...)
		Expect(err).NotTo(HaveOccurred(), out)
		virtual = map[string]bool{"ferry-a": true, "ferry-b": true}

		ns = framework.CreateNamespace(ctx, consumer, "failover")
		Expect(consumer.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
			ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns},
			Spec:       ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote},
		})).To(Succeed())
		Eventually(func(g Gomega) {
			var nso ferryv1alpha1.NamespaceOffloading
			g.Expect(consumer.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso)).To(Succeed())
			g.Expect(nso.Status.Clusters).To(HaveLen(2))
			for _, c := range nso.Status.Clusters {
				g.Expect(c.Phase).To(Equal(ferryv1alpha1.OffloadingReady))
				switch c.ClusterID {
				case "a":
					twinA = c.TwinNamespace
				case "b":
					twinB = c.TwinNamespace
				}
			}
		}).WithContext(ctx).WithTimeout(90 * time.Second).Should(Succeed())

		labels := map[string]string{"app": "db"}
		Expect(consumer.Client.Create(ctx, &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](dbReplicas), PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()}},
		})).To(Succeed())
		Expect(consumer.Client.Create(ctx, deployment(ns, "web", webReplicas, podSpec()))).To(Succeed())
		Eventually(func(g Gomega) { allOnA(ctx, g) }).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	})

	It("moves nothing on a glitch shorter than the lease duration", func(ctx context.Context) {
		var before corev1.PodList
		Expect(a.Client.List(ctx, &before, client.InNamespace(twinA))).To(Succeed())
		s := startSampler(ctx)
		proxy.setCut(true)
		time.Sleep(leaseSeconds / 2 * time.Second)
		proxy.setCut(false)
		Consistently(func(g Gomega) {
			allOnA(ctx, g)
			g.Expect(fenced(ctx)).To(BeFalse())
		}).WithContext(ctx).WithTimeout((leaseSeconds + marginSeconds) * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(s.stop()).To(BeEmpty())
		var after corev1.PodList
		Expect(a.Client.List(ctx, &after, client.InNamespace(twinA))).To(Succeed())
		uids := func(l corev1.PodList) []string {
			var out []string
			for _, p := range l.Items {
				out = append(out, string(p.UID))
			}
			return out
		}
		Expect(uids(after)).To(ConsistOf(uids(before)), "A's pods are the same pods: none stopped or recreated")
	})

	It("fails over without two copies at once when the consumer's path to A is cut while A runs, and leaves nothing stale when it returns", func(ctx context.Context) {
		s := startSampler(ctx)
		cut := time.Now()
		proxy.setCut(true)
		Eventually(fenced).WithContext(ctx).WithTimeout(3 * leaseSeconds * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
		fenceAt := time.Since(cut)
		Eventually(func(g Gomega) { allElsewhere(ctx, g) }).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		failoverAt := time.Since(cut)
		Eventually(consumerSaysOutOfService).WithContext(ctx).WithTimeout(5*time.Second).Should(BeTrue(), "the consumer's ForeignCluster for A says OutOfService=True")
		proxy.setCut(false)
		back := time.Now()
		Eventually(func(g Gomega) { staleGone(ctx, g) }).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		cleanAt := time.Since(back)
		Eventually(fenced).WithContext(ctx).WithTimeout(30*time.Second).Should(BeFalse(), "renewed: A unfences")
		Eventually(consumerSaysOutOfService).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeFalse())
		Consistently(func(g Gomega) { allElsewhere(ctx, g) }).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		AddReportEntry("path cut: A fenced after", fenceAt.Round(10*time.Millisecond).String())
		AddReportEntry("path cut: all pods running elsewhere after", failoverAt.Round(10*time.Millisecond).String())
		AddReportEntry("path cut: stale ShadowPods and pods gone from A, taint lifted, after its return", cleanAt.Round(10*time.Millisecond).String())
		Expect(s.stop()).To(BeEmpty(), "two copies of a pod identity ran at once")
	})

	It("fails over when A's API server stops; A's stale copies go when it returns (A is not observable meanwhile)", func(ctx context.Context) {
		backToA(ctx)
		s := startSampler(ctx)
		s.aDown(true)
		stop := time.Now()
		a.StopAPIServer()
		Eventually(func(g Gomega) {
			cp, err := sample(ctx, true)
			g.Expect(err).NotTo(HaveOccurred())
			for i := range dbReplicas {
				g.Expect(cp.db[fmt.Sprintf("db-%d", i)]).To(ContainElement(Or(Equal("local"), Equal("b"))))
			}
			g.Expect(cp.web["local"] + cp.web["b"]).To(Equal(webReplicas))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		failoverAt := time.Since(stop)
		Expect(a.StartAPIServer(ctx)).To(Succeed())
		back := time.Now()
		Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(a.Client.List(ctx, &pods, client.InNamespace(twinA))).To(Succeed())
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).NotTo(Equal(corev1.PodRunning), "stale %s still Running on A", p.Name)
			}
		}).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		stoppedAt := time.Since(back)
		s.aDown(false)
		Eventually(func(g Gomega) { staleGone(ctx, g) }).WithContext(ctx).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		cleanAt := time.Since(back)
		Eventually(func(g Gomega) { allElsewhere(ctx, g) }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) { allElsewhere(ctx, g) }).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		overlaps := s.stop()
		AddReportEntry("API server down: all pods running elsewhere after", failoverAt.Round(10*time.Millisecond).String())
		AddReportEntry("API server down: A's stale copies stopped after its return", stoppedAt.Round(10*time.Millisecond).String())
		AddReportEntry("API server down: stale ShadowPods gone and taint lifted after its return", cleanAt.Round(10*time.Millisecond).String())
		// While A's API server was down its pods could not be seen; they
		// count as running, so the replacements overlap them from the
		// failover until A's return: what a provider without its API
		// server cannot prevent (docs/operations/failure-behaviour.md, "Failover and fencing").
		AddReportEntry("API server down: samples with A's last known copies beside their replacements", fmt.Sprint(len(overlaps)))
	})
})
