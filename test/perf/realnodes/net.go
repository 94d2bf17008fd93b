package realnodes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/realbed"
	"github.com/ferry-io/ferry/test/testbed"
)

const (
	serverLabel = "bench-probe-server"
	serviceName = "probe"
	// nodePortServiceName is the provider's own NodePort Service of the
	// servers, beside the reflected one.
	nodePortServiceName = "probe-nodeport"
	httpPort            = 8080
	tcpPort             = 5201
)

var probeResources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
	corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}

// serverPod runs `probe serve`, Ready once its HTTP server answers.
func serverPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": serverLabel}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "serve", Image: realbed.ProbeImage, ImagePullPolicy: corev1.PullNever,
				Args:  []string{"serve", fmt.Sprintf("-http=:%d", httpPort), fmt.Sprintf("-tcp=:%d", tcpPort)},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: httpPort}, {Name: "tcp", ContainerPort: tcpPort}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(httpPort)}},
					PeriodSeconds: 1},
				Resources: probeResources,
			}},
		},
	}
}

func service(namespace, name string, typ corev1.ServiceType) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: map[string]string{"app": serverLabel},
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)},
				{Name: "tcp", Port: tcpPort, TargetPort: intstr.FromInt32(tcpPort)},
			},
		},
	}
}

// servers are the offloaded probe servers and how each side reaches them.
type servers struct {
	// ServiceIP of the Service selecting them: the consumer's, and the
	// provider's copy in the twin namespace.
	ConsumerServiceIP, ProviderServiceIP string
	// PodIP of the first server as each cluster shows it: the consumer in
	// the range standing for the provider's pods, the provider its own.
	ConsumerPodIP, ProviderPodIP string
	// NodePortHTTP and NodePortTCP are the ports of a NodePort Service
	// selecting the same pods, made in the provider's twin namespace: the
	// way across the underlay without ferry's fabric.
	NodePortHTTP, NodePortTCP int32
}

// startServers creates n probe servers in the offloaded namespace and the
// Service selecting them, and waits until both clusters' Services have n
// ready endpoints.
func startServers(ctx context.Context, consumer, provider *testbed.Cluster, offloaded, twin string, n int, timeout time.Duration) (servers, error) {
	var s servers
	for i := range n {
		if _, err := consumer.Kube.CoreV1().Pods(offloaded).Create(ctx, serverPod(offloaded, fmt.Sprintf("server-%d", i)), metav1.CreateOptions{}); err != nil {
			return s, fmt.Errorf("%s: create server pod: %w", consumer.Name, err)
		}
	}
	if _, err := consumer.Kube.CoreV1().Services(offloaded).Create(ctx, service(offloaded, serviceName, corev1.ServiceTypeClusterIP), metav1.CreateOptions{}); err != nil {
		return s, fmt.Errorf("%s: create Service %s/%s: %w", consumer.Name, offloaded, serviceName, err)
	}
	np, err := provider.Kube.CoreV1().Services(twin).Create(ctx, service(twin, nodePortServiceName, corev1.ServiceTypeNodePort), metav1.CreateOptions{})
	if err != nil {
		return s, fmt.Errorf("%s: create Service %s/%s: %w", provider.Name, twin, nodePortServiceName, err)
	}
	s.NodePortHTTP, s.NodePortTCP = np.Spec.Ports[0].NodePort, np.Spec.Ports[1].NodePort
	var last error
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = nil
		for _, side := range []struct {
			c      *testbed.Cluster
			ns     string
			svcIP  *string
			pod0IP *string
		}{{consumer, offloaded, &s.ConsumerServiceIP, &s.ConsumerPodIP}, {provider, twin, &s.ProviderServiceIP, &s.ProviderPodIP}} {
			if err := readyEndpoints(ctx, side.c, side.ns, serviceName, n); err != nil {
				last = err
				return false, nil
			}
			svc, err := side.c.Kube.CoreV1().Services(side.ns).Get(ctx, serviceName, metav1.GetOptions{})
			if err != nil {
				last = fmt.Errorf("%s: Service %s/%s: %w", side.c.Name, side.ns, serviceName, err)
				return false, nil
			}
			pod, err := side.c.Kube.CoreV1().Pods(side.ns).Get(ctx, "server-0", metav1.GetOptions{})
			if err != nil || pod.Status.PodIP == "" {
				last = fmt.Errorf("%s: pod %s/server-0 has no IP yet (%v)", side.c.Name, side.ns, err)
				return false, nil
			}
			*side.svcIP, *side.pod0IP = svc.Spec.ClusterIP, pod.Status.PodIP
		}
		if err := readyEndpoints(ctx, provider, twin, nodePortServiceName, n); err != nil {
			last = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return s, fmt.Errorf("probe servers not reachable by Service: %w (last: %v)", err, last)
	}
	return s, nil
}

func readyEndpoints(ctx context.Context, c *testbed.Cluster, namespace, service string, want int) error {
	list, err := c.Kube.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return fmt.Errorf("%s: EndpointSlices of %s/%s: %w", c.Name, namespace, service, err)
	}
	ready := 0
	for _, sl := range list.Items {
		for _, e := range sl.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				ready += len(e.Addresses)
			}
		}
	}
	if ready < want {
		return fmt.Errorf("%s: Service %s/%s has %d ready endpoints, want %d", c.Name, namespace, service, ready, want)
	}
	return nil
}

// runProbe runs a probe client pod with args on node of c, waits until
// it ends, and decodes its PROBE line into v.
func runProbe(ctx context.Context, c *testbed.Cluster, namespace, name string, args []string, timeout time.Duration, v any) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:                      c.RealNodes[0].Name,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{
				Name: "probe", Image: realbed.ProbeImage, ImagePullPolicy: corev1.PullNever, Args: args, Resources: probeResources,
			}},
		},
	}
	if _, err := c.Kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: create probe pod %s: %w", c.Name, name, err)
	}
	defer func() {
		_ = c.Kube.CoreV1().Pods(namespace).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.Kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	})
	logs, lerr := c.Kube.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%s: probe pod %s (%s) did not end within %s: %w; log: %s", c.Name, name, strings.Join(args, " "), timeout, err, logs)
	}
	if lerr != nil {
		return fmt.Errorf("%s: log of probe pod %s: %w", c.Name, name, lerr)
	}
	for line := range strings.SplitSeq(string(logs), "\n") {
		if rest, ok := strings.CutPrefix(line, "PROBE "); ok {
			return json.Unmarshal([]byte(rest), v)
		}
	}
	return fmt.Errorf("%s: probe pod %s ended %s without a result; log: %s", c.Name, name, phase, logs)
}

// httpResult and tcpResult are what the probe prints (test/realbed/probe).
type httpResult struct {
	SamplesMicros []int64 `json:"samples_us"`
	Errors        int     `json:"errors"`
	FirstError    string  `json:"first_error"`
}

type tcpResult struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error"`
}

// side is one client's place: the cluster and namespace its pods run in,
// the URL it requests and the address it streams to.
type side struct {
	name      string
	c         *testbed.Cluster
	namespace string
	url, addr string
}

// netOptions of measureNetwork.
type netOptions struct {
	Requests, Rounds int
	Stream           time.Duration
	StreamRounds     int
	// Clusters whose real nodes' CPU is sampled around each stream.
	Clusters []*testbed.Cluster
}

// measureNetwork times requests and streams from each side in rounds that
// rotate which side goes first; a side that fails stops being measured,
// and its error is its result.
func measureNetwork(ctx context.Context, sides []side, opts netOptions, log io.Writer) (map[string]*Durations, map[string]*Throughput) {
	reqs, tps := map[string]*Durations{}, map[string]*Throughput{}
	for _, sd := range sides {
		reqs[sd.name], tps[sd.name] = &Durations{}, &Throughput{}
	}
	perRound := max(opts.Requests/opts.Rounds, 1)
	for r := range opts.Rounds {
		for _, sd := range rotate(sides, r) {
			d := reqs[sd.name]
			if d.Err != nil {
				continue
			}
			var res httpResult
			err := runProbe(ctx, sd.c, sd.namespace, fmt.Sprintf("http-%s-%d", sd.name, r),
				[]string{"http", "-url=" + sd.url, "-n=" + strconv.Itoa(perRound)}, 5*time.Minute, &res)
			switch {
			case err != nil:
				d.Err = err
			case res.Errors > 0:
				d.Err = fmt.Errorf("%s: %d of %d requests to %s failed, first: %s", sd.c.Name, res.Errors, res.Errors+len(res.SamplesMicros), sd.url, res.FirstError)
			default:
				d.Samples = append(d.Samples, durations(res.SamplesMicros)...)
				round := Durations{Samples: durations(res.SamplesMicros)}
				fmt.Fprintf(log, "requests %s round %d: %d to %s, p50 %s p99 %s\n", sd.name, r, len(res.SamplesMicros), sd.url, round.P(50), round.P(99))
			}
			if d.Err != nil {
				d.Samples = nil
				fmt.Fprintf(log, "requests %s round %d: FAILED: %v\n", sd.name, r, d.Err)
			}
		}
	}
	for r := range opts.StreamRounds {
		for _, sd := range rotate(sides, r) {
			t := tps[sd.name]
			if t.Err != nil {
				continue
			}
			var res tcpResult
			before, beforeSched := cpuByProcess(opts.Clusters...), schedOf("ferry-gateway", opts.Clusters...)
			err := runProbe(ctx, sd.c, sd.namespace, fmt.Sprintf("tcp-%s-%d", sd.name, r),
				[]string{"tcp", "-addr=" + sd.addr, "-duration=" + opts.Stream.String()}, opts.Stream+2*time.Minute, &res)
			if err == nil && res.Error == "" {
				// The probe pod's start and end are in the sample too: a
				// bound on what the stream itself took.
				fmt.Fprintf(log, "stream %s round %d: busiest processes of the real nodes while its pod ran, in cores over the stream's %.1f s: %s\n",
					sd.name, r, res.Seconds, cpuDelta(before, cpuByProcess(opts.Clusters...), res.Seconds, 6))
				fmt.Fprintf(log, "stream %s round %d: the gateways' threads while its pod ran: %s\n", sd.name, r, schedDelta(beforeSched, schedOf("ferry-gateway", opts.Clusters...)))
			}
			switch {
			case err != nil:
				t.Err = err
			case res.Error != "":
				t.Err = fmt.Errorf("%s: stream to %s: %s", sd.c.Name, sd.addr, res.Error)
			default:
				t.Bytes += res.Bytes
				t.Seconds += res.Seconds
				fmt.Fprintf(log, "stream %s round %d: %d MiB to %s in %.2f s: %.0f Mbit/s\n", sd.name, r, res.Bytes>>20, sd.addr, res.Seconds,
					Throughput{Bytes: res.Bytes, Seconds: res.Seconds}.MbitPerSecond())
			}
			if t.Err != nil {
				t.Bytes, t.Seconds = 0, 0
				fmt.Fprintf(log, "stream %s round %d: FAILED: %v\n", sd.name, r, t.Err)
			}
		}
	}
	return reqs, tps
}

// rotate is sides starting at the r-th, so that each round another side
// goes first.
func rotate(sides []side, r int) []side {
	k := r % len(sides)
	return append(slices.Clone(sides[k:]), sides[:k]...)
}

func durations(us []int64) []time.Duration {
	ds := make([]time.Duration, len(us))
	for i, u := range us {
		ds[i] = time.Duration(u) * time.Microsecond
	}
	return ds
}
