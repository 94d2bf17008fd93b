package kubeletapi

import (
	"context"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// summary is the node's stats summary: one entry per local pod bound to the
// node, with the CPU and memory its twin uses on the provider when the
// provider serves the resource metrics API (metrics.k8s.io), and the node's
// totals. Without that API the pods are listed without usage.
func (s *Server) summary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	pods, err := s.pods(ctx)
	if err != nil {
		return nil, err
	}
	usage := map[string]map[string]metricsv1beta1.PodMetrics{} // local namespace -> pod -> metrics
	sum := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
		NodeName:  s.cfg.NodeName,
		StartTime: metav1.NewTime(s.started),
	}}
	var nodeCPU, nodeMem, nodeCPUTotal uint64
	var haveUsage bool
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		ns, ok := usage[pod.Namespace]
		if !ok {
			ns = s.twinMetrics(ctx, pod.Namespace)
			usage[pod.Namespace] = ns
		}
		ps := statsv1alpha1.PodStats{
			PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		}
		if pod.Status.StartTime != nil {
			ps.StartTime = *pod.Status.StartTime
		}
		pm, measured := ns[pod.Name]
		var podCPU, podMem, podCPUTotal uint64
		for _, c := range pod.Spec.Containers {
			cs := statsv1alpha1.ContainerStats{Name: c.Name, StartTime: ps.StartTime}
			if i := slices.IndexFunc(pm.Containers, func(cm metricsv1beta1.ContainerMetrics) bool { return cm.Name == c.Name }); measured && i >= 0 {
				cm := pm.Containers[i]
				cpu := uint64(cm.Usage.Cpu().ScaledValue(-9))
				mem := uint64(cm.Usage.Memory().Value())
				at := metav1.NewTime(pm.Timestamp.Time)
				total := s.cpu.add(pod.UID, c.Name, cpu, pm.Timestamp.Time)
				cs.CPU = &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &cpu, UsageCoreNanoSeconds: &total}
				cs.Memory = &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &mem, UsageBytes: &mem}
				podCPU, podMem, podCPUTotal = podCPU+cpu, podMem+mem, podCPUTotal+total
			}
			ps.Containers = append(ps.Containers, cs)
		}
		if measured {
			at := metav1.NewTime(pm.Timestamp.Time)
			ps.CPU = &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &podCPU, UsageCoreNanoSeconds: &podCPUTotal}
			ps.Memory = &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &podMem, UsageBytes: &podMem}
			nodeCPU, nodeMem, nodeCPUTotal = nodeCPU+podCPU, nodeMem+podMem, nodeCPUTotal+podCPUTotal
			haveUsage = true
		}
		sum.Pods = append(sum.Pods, ps)
	}
	if haveUsage {
		at := metav1.Now()
		sum.Node.CPU = &statsv1alpha1.CPUStats{Time: at, UsageNanoCores: &nodeCPU, UsageCoreNanoSeconds: &nodeCPUTotal}
		sum.Node.Memory = &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: &nodeMem, UsageBytes: &nodeMem}
	}
	s.cpu.forgetExcept(pods)
	return sum, nil
}

// twinMetrics is the provider's PodMetrics of a local namespace's twin, by
// pod name, or nil when the twin or the metrics API is missing.
func (s *Server) twinMetrics(ctx context.Context, namespace string) map[string]metricsv1beta1.PodMetrics {
	twin, err := s.resolver.twinNamespace(ctx, namespace)
	if err != nil {
		return nil
	}
	list, err := s.metrics.MetricsV1beta1().PodMetricses(twin).List(ctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			klog.FromContext(ctx).V(2).Info("Provider pod metrics unavailable", "twinNamespace", twin, "err", err.Error())
		}
		return nil
	}
	out := make(map[string]metricsv1beta1.PodMetrics, len(list.Items))
	for _, m := range list.Items {
		out[m.Name] = m
	}
	return out
}

// cpuCounters turns the provider's CPU usage rates into the cumulative
// counters the kubelet API reports (metrics-server derives rates from
// them), integrating each rate over the time between two samples. They start
// at zero when the virtual kubelet does, as a kubelet's do for a new
// container.
type cpuCounters struct {
	mu  sync.Mutex
	byC map[cpuKey]*cpuCounter
}

type cpuKey struct {
	pod       types.UID
	container string
}

type cpuCounter struct {
	total uint64 // core-nanoseconds
	last  time.Time
}

func (c *cpuCounters) add(pod types.UID, container string, rate uint64, at time.Time) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byC == nil {
		c.byC = map[cpuKey]*cpuCounter{}
	}
	k := cpuKey{pod, container}
	cc, ok := c.byC[k]
	if !ok {
		cc = &cpuCounter{last: at}
		c.byC[k] = cc
	}
	if at.After(cc.last) {
		// The rate measured at `at` covers the window that ends there.
		cc.total += uint64(float64(rate) * at.Sub(cc.last).Seconds())
		cc.last = at
	}
	return cc.total
}

// forgetExcept drops the counters of pods no longer on the node.
func (c *cpuCounters) forgetExcept(pods []*corev1.Pod) {
	keep := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		keep[p.UID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.byC {
		if !keep[k.pod] {
			delete(c.byC, k)
		}
	}
}

// resourceMetrics is the summary in the kubelet's /metrics/resource format,
// which metrics-server scrapes.
func (s *Server) resourceMetrics(ctx context.Context) ([]*dto.MetricFamily, error) {
	sum, err := s.summary(ctx)
	if err != nil {
		return nil, err
	}
	return resourceMetricFamilies(sum), nil
}

func resourceMetricFamilies(sum *statsv1alpha1.Summary) []*dto.MetricFamily {
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	family := func(name, help string, t dto.MetricType) *dto.MetricFamily {
		return &dto.MetricFamily{Name: &name, Help: &help, Type: &t}
	}
	label := func(k, v string) *dto.LabelPair { return &dto.LabelPair{Name: &k, Value: &v} }
	sample := func(f *dto.MetricFamily, v float64, at metav1.Time, labels ...*dto.LabelPair) {
		ms := at.UnixMilli()
		m := &dto.Metric{Label: labels, TimestampMs: &ms}
		if *f.Type == dto.MetricType_COUNTER {
			m.Counter = &dto.Counter{Value: &v}
		} else {
			m.Gauge = &dto.Gauge{Value: &v}
		}
		f.Metric = append(f.Metric, m)
	}
	nodeCPU := family("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", counter)
	nodeMem := family("node_memory_working_set_bytes", "Current working set of the node in bytes", gauge)
	podCPU := family("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", counter)
	podMem := family("pod_memory_working_set_bytes", "Current working set of the pod in bytes", gauge)
	cCPU := family("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", counter)
	cMem := family("container_memory_working_set_bytes", "Current working set of the container in bytes", gauge)
	cStart := family("container_start_time_seconds", "Start time of the container since unix epoch in seconds", gauge)
	if n := sum.Node; n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		sample(nodeCPU, float64(*n.CPU.UsageCoreNanoSeconds)/1e9, n.CPU.Time)
		sample(nodeMem, float64(*n.Memory.WorkingSetBytes), n.Memory.Time)
	}
	for _, p := range sum.Pods {
		ns, pod := label("namespace", p.PodRef.Namespace), label("pod", p.PodRef.Name)
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			sample(podCPU, float64(*p.CPU.UsageCoreNanoSeconds)/1e9, p.CPU.Time, ns, pod)
			sample(podMem, float64(*p.Memory.WorkingSetBytes), p.Memory.Time, ns, pod)
		}
		for _, c := range p.Containers {
			cl := label("container", c.Name)
			if !c.StartTime.IsZero() {
				sample(cStart, float64(c.StartTime.Unix()), c.StartTime, cl, ns, pod)
			}
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				sample(cCPU, float64(*c.CPU.UsageCoreNanoSeconds)/1e9, c.CPU.Time, cl, ns, pod)
				sample(cMem, float64(*c.Memory.WorkingSetBytes), c.Memory.Time, cl, ns, pod)
			}
		}
	}
	var out []*dto.MetricFamily
	for _, f := range []*dto.MetricFamily{nodeCPU, nodeMem, podCPU, podMem, cCPU, cMem, cStart} {
		if len(f.Metric) > 0 {
			out = append(out, f)
		}
	}
	return out
}
