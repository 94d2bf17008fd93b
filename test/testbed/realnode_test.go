package testbed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/testbed"
)

// hostPathsNodesWouldTouch are the shared paths a kubelet, containerd and
// the CNI plugins use by default; a confined node must leave them as they
// were.
var hostPathsNodesWouldTouch = []string{
	"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd",
	"/var/lib/containerd", "/var/lib/cni", "/etc/cni/net.d", "/opt/containerd",
	"/run/netns", "/var/run/netns",
}

// TestRealNodes runs two real nodes: pods start from imported images, a
// Service answers by its DNS name through CoreDNS and kube-proxy, across
// nodes, and by NodePort; exec and logs reach the containers. Throughout,
// the host's kernel settings the kubelet writes stay as they were, and
// after Stop nothing is left: no process in the nodes' namespaces or
// cgroups, no cgroup, no mount, no file in the host's shared paths.
func TestRealNodes(t *testing.T) {
	testbed.RequireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	sysctlsBefore, err := testbed.HostSysctls()
	if err != nil {
		t.Fatal(err)
	}
	existedBefore := map[string]bool{}
	for _, p := range hostPathsNodesWouldTouch {
		_, err := os.Lstat(p)
		existedBefore[p] = err == nil
	}

	start := time.Now()
	c, err := testbed.Start(ctx, testbed.Options{Name: "real", RealNodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with 2 real nodes and DNS up in %s", time.Since(start).Round(100*time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			if t.Failed() {
				t.Log(c.Logs(40))
				for _, n := range c.RealNodes {
					t.Log(n.Logs(40))
				}
			}
			_ = c.Stop()
		}
	}()

	const ns = "default"
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					// One replica on each node.
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "netexec", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
						Args:           []string{"netexec", "--http-port=8080"},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeNodePort, Selector: labels,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      c.RealNodes[1].Name,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "client", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"netexec", "--http-port=8080"},
			}},
		},
	}
	// A host-network pod, like ferry's route agent or kube-proxy as a
	// DaemonSet, reaches Service IPs from the node's own namespace.
	hostClient := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "host-client", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName: c.RealNodes[0].Name, HostNetwork: true,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "client", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"pause"},
			}},
		},
	}
	for _, o := range []interface {
		GetName() string
	}{dep, svc, client, hostClient} {
		var err error
		switch o := o.(type) {
		case *appsv1.Deployment:
			_, err = c.Kube.AppsV1().Deployments(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			svc, err = c.Kube.CoreV1().Services(ns).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = c.Kube.CoreV1().Pods(ns).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	waitUntil(t, ctx, "echo Deployment available on both nodes, client Running", func() error {
		d, err := c.Kube.AppsV1().Deployments(ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%d of 2 echo replicas available", d.Status.AvailableReplicas)
		}
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("client is %s", p.Status.Phase)
		}
		return nil
	})
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	hostnames := map[string]bool{}
	for _, p := range pods.Items {
		hostnames[p.Name] = true
	}

	// By DNS name and ClusterIP, from a pod on the second node, answered by
	// both replicas (one on the client's node, one across nodes): the
	// client's netexec dials the Service on our behalf (its /dial), reached
	// through the API server's pod proxy.
	seen := map[string]bool{}
	waitUntil(t, ctx, "both echo replicas answering through the Service's DNS name", func() error {
		raw, err := c.Kube.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("client:8080").SubResource("proxy").Suffix("dial").
			Param("request", "hostname").Param("protocol", "http").Param("host", "echo.default.svc.cluster.local").
			Param("port", "80").Param("tries", "10").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("dial through client: %v: %s", err, raw)
		}
		var answer struct {
			Responses []string `json:"responses"`
			Errors    []string `json:"errors"`
		}
		if err := json.Unmarshal(raw, &answer); err != nil {
			return fmt.Errorf("decode %s: %w", raw, err)
		}
		for _, r := range answer.Responses {
			if !hostnames[r] {
				return fmt.Errorf("answer %q is from no echo pod", r)
			}
			seen[r] = true
		}
		if len(seen) < 2 {
			return fmt.Errorf("answers from %v so far (errors: %v)", seen, answer.Errors)
		}
		return nil
	})

	// By NodePort on each node's InternalIP, from the client pod.
	for _, n := range c.RealNodes {
		target := fmt.Sprintf("%s:%d", n.IP, svc.Spec.Ports[0].NodePort)
		waitUntil(t, ctx, "NodePort "+target, func() error {
			out, err := c.Exec(ctx, ns, "client", "/agnhost", "connect", "--timeout=3s", target)
			if err != nil {
				return fmt.Errorf("connect %s: %v: %s", target, err, out)
			}
			return nil
		})
	}

	for _, target := range []string{"10.96.0.1:443", fmt.Sprintf("%s:80", svc.Spec.ClusterIP)} {
		waitUntil(t, ctx, "host-network pod reaching "+target, func() error {
			out, err := c.Exec(ctx, ns, "host-client", "/agnhost", "connect", "--timeout=3s", target)
			if err != nil {
				return fmt.Errorf("connect %s: %v: %s", target, err, out)
			}
			return nil
		})
	}

	// Logs reach the container through the API server and the kubelet.
	logs, err := c.Kube.CoreV1().Pods(ns).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s: %v", pods.Items[0].Name, err)
	}
	if !bytes.Contains(logs, []byte("Started HTTP server on port 8080")) {
		t.Errorf("logs of %s do not show netexec's start:\n%s", pods.Items[0].Name, logs)
	}

	if now, err := testbed.HostSysctls(); err != nil {
		t.Fatal(err)
	} else {
		for k, v := range sysctlsBefore {
			if now[k] != v {
				t.Errorf("host /proc/sys/%s changed while nodes ran: %s → %s", k, v, now[k])
			}
		}
	}

	// Every process in the nodes' namespaces now (the kubelets, containerds,
	// shims, kube-proxies, the containers' pause and netexec processes share
	// the nodes' mount namespace or the pods' own): none may outlive Stop.
	var cgroups []string
	inNodes := map[string]string{} // "pid starttime" → command line
	for _, n := range c.RealNodes {
		netIno, mntIno := n.Namespaces()
		cgroups = append(cgroups, n.Cgroup())
		for id, cmd := range processesIn(t, netIno, mntIno) {
			inNodes[id] = cmd
		}
	}
	if len(inNodes) < 2*4 { // per node: holder, containerd, kubelet, kube-proxy
		t.Fatalf("only %d processes found in the nodes' namespaces: %v", len(inNodes), inNodes)
	}
	dir := c.Dir
	stopped = true
	if err := c.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}

	// Nothing left.
	for id, cmd := range inNodes {
		if alive(id) {
			pid, _, _ := strings.Cut(id, " ")
			cg, _ := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
			t.Errorf("process %s (%s) outlived Stop; its cgroups:\n%s", id, cmd, cg)
		}
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		for _, cg := range cgroups {
			if _, err := os.Stat(filepath.Join(h, cg)); err == nil {
				t.Errorf("cgroup %s left in %s", cg, h)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(mounts, []byte(dir)) {
		t.Errorf("mounts under %s left:\n%s", dir, mounts)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("cluster folder %s left", dir)
	}
	for _, p := range hostPathsNodesWouldTouch {
		if _, err := os.Lstat(p); err == nil && !existedBefore[p] {
			t.Errorf("host path %s did not exist before the nodes ran, and does now", p)
		}
	}
	if now, err := testbed.HostSysctls(); err != nil {
		t.Fatal(err)
	} else {
		for k, v := range sysctlsBefore {
			if now[k] != v {
				t.Errorf("host /proc/sys/%s changed: %s → %s", k, v, now[k])
			}
		}
	}
}

// processesIn returns the processes in a network or mount namespace, keyed
// by PID and start time (a PID alone may be reused).
func processesIn(t *testing.T, netIno, mntIno uint64) map[string]string {
	t.Helper()
	out := map[string]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		in := false
		for kind, ino := range map[string]uint64{"net": netIno, "mnt": mntIno} {
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(p, "ns", kind), &st) == nil && st.Ino == ino {
				in = true
			}
		}
		if !in {
			continue
		}
		id, ok := processID(filepath.Base(p))
		if !ok {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		out[id] = strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// processID is "<pid> <start time>", from /proc/<pid>/stat.
func processID(pid string) (string, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", false
	}
	// The command (field 2) may hold spaces; fields after its ")" are plain.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	fields := strings.Fields(string(rest))
	if len(fields) < 20 {
		return "", false
	}
	return pid + " " + fields[19], true // field 22: starttime
}

// alive says whether the process still runs: a zombie (killed, not yet
// reaped by the init process that inherited it, as containerd's shims are)
// does not.
func alive(id string) bool {
	pid, _, _ := strings.Cut(id, " ")
	now, ok := processID(pid)
	if !ok || now != id {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func waitUntil(t *testing.T, ctx context.Context, what string, check func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		if last = check(); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
