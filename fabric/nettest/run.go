package nettest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/charts"
)

// LabelRun marks every object a run makes, with the run's ID: a leftover of
// a killed run is found by it.
const LabelRun = "ferry.io/test-network"

// AnnotationExpires, on a run's namespace, is when the run is over for
// sure (its start plus its --timeout): a later run removes a namespace past
// it.
const AnnotationExpires = "ferry.io/test-network-expires"

// DefaultImage is agnhost, of the version the test bed builds.
const DefaultImage = "registry.k8s.io/e2e-test-images/agnhost:2.63"

// GatewayDeployment is ferry's gateway Deployment in ferry-system.
const GatewayDeployment = "ferry-gateway"

// Options of a run.
type Options struct {
	// Image is agnhost's image; PullPolicy its pull policy.
	Image      string
	PullPolicy corev1.PullPolicy
	// Peers limits the run to these providers; empty: every provider this
	// cluster offloads to.
	Peers []string
	// Timeout bounds the whole run (cleanup aside); SetupTimeout the pods'
	// start; CheckTimeout each check, retries included.
	Timeout, SetupTimeout, CheckTimeout time.Duration
	// CleanupTimeout bounds the cleanup, which runs with a fresh context.
	CleanupTimeout time.Duration
	// Log gets progress lines.
	Log io.Writer
}

// Check is one path checked, with its result.
type Check struct {
	Path   Path   `json:"path"`
	From   string `json:"from"`
	To     string `json:"to"`
	Target string `json:"target"`
	// Cross: the path crosses between two clusters.
	Cross  bool   `json:"crossCluster"`
	Peer   string `json:"peer,omitempty"`
	Passed bool   `json:"passed"`
	// Latency is one request's, each over a new connection, as the client
	// pod sees it (twenty requests timed in a row, the port-forward's share
	// taken out); "<50µs" below what the jitter lets tell apart.
	Latency       string `json:"latency,omitempty"`
	LatencyMicros int64  `json:"latencyMicroseconds,omitempty"`
	Cause         Cause  `json:"cause,omitempty"`
	Detail        string `json:"detail,omitempty"`
}

// Report is a run's result.
type Report struct {
	Cluster   string      `json:"cluster"`
	RunID     string      `json:"runID"`
	Namespace string      `json:"namespace"`
	Peers     []PeerState `json:"peers"`
	Checks    []Check     `json:"checks"`
	Passed    bool        `json:"passed"`
	// Cleanup is what could not be removed; empty when all is gone.
	Cleanup string `json:"cleanup,omitempty"`
}

// Failed counts the failed checks.
func (r *Report) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.Passed {
			n++
		}
	}
	return n
}

// run is one run's state.
type run struct {
	cfg     *rest.Config
	c       client.Client
	opts    Options
	id, ns  string
	local   ferryv1alpha1.NetworkConfig
	peers   []*PeerState
	nodes   map[string]string // peer → its virtual node (one of them)
	clients map[string]*prober
	pods    map[string]*corev1.Pod
	report  *Report
}

// Run checks the fabric from the cluster of cfg (a consumer) to each of its
// providers and back, and removes what it made before it returns, also when
// ctx is cancelled (the cleanup has its own context). The error is for a
// run that could not check at all; failed checks are in the report.
func Run(ctx context.Context, cfg *rest.Config, opts Options) (*Report, error) {
	c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	r := &run{cfg: cfg, c: c, opts: opts, id: fmt.Sprintf("%x", id), clients: map[string]*prober{}, pods: map[string]*corev1.Pod{}, nodes: map[string]string{}}
	r.ns = "ferry-test-network-" + r.id
	r.report = &Report{RunID: r.id, Namespace: r.ns}
	if opts.Log == nil {
		r.opts.Log = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	if err := RemoveLeftovers(ctx, c, r.opts.Log, time.Now()); err != nil {
		return nil, err
	}
	if err := r.readFabric(ctx); err != nil {
		return nil, err
	}
	defer func() {
		for _, cl := range r.clients {
			cl.stop()
		}
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), opts.CleanupTimeout)
		defer ccancel()
		if err := removeNamespace(cctx, c, r.ns, r.opts.Log); err != nil {
			r.report.Cleanup = err.Error()
		}
	}()
	if err := r.setup(ctx); err != nil {
		return r.report, err
	}
	r.checks(ctx)
	r.report.Passed = r.report.Failed() == 0
	if ctx.Err() != nil {
		return r.report, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return r.report, nil
}

// readFabric reads this cluster's NetworkConfigs, its virtual nodes and its
// gateway Deployment.
func (r *run) readFabric(ctx context.Context) error {
	var ncs ferryv1alpha1.NetworkConfigList
	if err := r.c.List(ctx, &ncs, client.InNamespace(charts.Namespace)); err != nil {
		return fmt.Errorf("list NetworkConfigs in %s: %w", charts.Namespace, err)
	}
	peerNCs := map[string]*ferryv1alpha1.NetworkConfig{}
	found := false
	for i := range ncs.Items {
		nc := &ncs.Items[i]
		switch nc.Labels[ferryv1alpha1.LabelNetworkConfig] {
		case ferryv1alpha1.NetworkConfigLocal:
			r.local, found = *nc, true
		case ferryv1alpha1.NetworkConfigPeer:
			// Of two for one peer, the one that knows this cluster's place there.
			if old := peerNCs[string(nc.Spec.ClusterID)]; old == nil || old.Status.PodCIDRAtPeer == "" {
				peerNCs[string(nc.Spec.ClusterID)] = nc
			}
		}
	}
	if !found {
		return fmt.Errorf("no local NetworkConfig in %s: is ferry's network fabric installed?", charts.Namespace)
	}
	r.report.Cluster = string(r.local.Spec.ClusterID)
	var vns ferryv1alpha1.VirtualNodeList
	if err := r.c.List(ctx, &vns); err != nil {
		return fmt.Errorf("list VirtualNodes: %w", err)
	}
	for i := range vns.Items {
		id := string(vns.Items[i].Spec.ClusterID)
		if _, ok := r.nodes[id]; !ok && (len(r.opts.Peers) == 0 || slices.Contains(r.opts.Peers, id)) {
			r.nodes[id] = vns.Items[i].Node()
		}
	}
	for _, p := range r.opts.Peers {
		if _, ok := r.nodes[p]; !ok {
			return fmt.Errorf("--peer %s: this cluster has no virtual node of that provider", p)
		}
	}
	if len(r.nodes) == 0 {
		return fmt.Errorf("this cluster offloads to no provider (no VirtualNode): nothing to check")
	}
	gw := r.gateway(ctx)
	ids := make([]string, 0, len(r.nodes))
	for id := range r.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p := PeerStateOf(peerNCs[id], id)
		p.GatewayKnown, p.GatewayReady, p.GatewayReplicas = gw.known, gw.ready, gw.replicas
		if g := r.local.Status.Gateway; g != nil {
			p.MTU = g.MTU
		}
		r.peers = append(r.peers, p)
		r.report.Peers = append(r.report.Peers, *p)
	}
	return nil
}

type gatewayState struct {
	known           bool
	ready, replicas int32
}

// gateway reads this cluster's gateway Deployment; unknown when it cannot.
func (r *run) gateway(ctx context.Context) gatewayState {
	var d appsv1.Deployment
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: charts.Namespace, Name: GatewayDeployment}, &d); err != nil {
		return gatewayState{}
	}
	return gatewayState{known: true, ready: d.Status.ReadyReplicas, replicas: ptr.Deref(d.Spec.Replicas, 1)}
}

// PeerStateOf is what a peer's NetworkConfig says of the fabric to it (nc
// nil: none, as for a peer whose network was never exchanged).
func PeerStateOf(nc *ferryv1alpha1.NetworkConfig, id string) *PeerState {
	p := &PeerState{ClusterID: id}
	if nc == nil {
		p.RemappedWhy = "no NetworkConfig of the peer in " + charts.Namespace
		return p
	}
	p.PodCIDR, p.RemappedCIDR, p.PodCIDRAtPeer, p.APIServerAtPeer = nc.Spec.PodCIDR, nc.Status.RemappedPodCIDR, nc.Status.PodCIDRAtPeer, nc.Status.APIServerAddressAtPeer
	if c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigTunnelUp); c != nil {
		p.TunnelKnown, p.TunnelUp, p.TunnelReason, p.TunnelMessage = true, c.Status == metav1.ConditionTrue, c.Reason, c.Message
	}
	if t := nc.Status.Tunnel; t != nil && t.LastHandshakeTime != nil {
		p.LastHandshake = t.LastHandshakeTime.Time
	}
	switch c := meta.FindStatusCondition(nc.Status.Conditions, ferryv1alpha1.NetworkConfigRemapped); {
	case c == nil:
		p.RemappedWhy = "no Remapped condition yet"
	case c.Status == metav1.ConditionTrue:
		p.Remapped = true
	default:
		p.RemappedWhy = c.Reason + ": " + c.Message
	}
	return p
}

// homeName and home2Name are the run's pods (and Services) in this
// cluster; awayName the one in the i-th peer (sorted by cluster ID).
const homeName, home2Name = "home", "home-2"

func awayName(i int) string { return fmt.Sprintf("away-%d", i) }

// setup makes the namespace, offloads it to the peers (pods stay here
// unless pinned to a virtual node), starts the pods and their Services and
// port-forwards to each pod.
func (r *run) setup(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, r.opts.SetupTimeout)
	defer cancel()
	labels := map[string]string{LabelRun: r.id}
	expires := time.Now().Add(r.opts.Timeout).UTC().Format(time.RFC3339)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns, Labels: labels, Annotations: map[string]string{AnnotationExpires: expires}}}
	if err := r.c.Create(sctx, ns); err != nil {
		return fmt.Errorf("create namespace %s: %w", r.ns, err)
	}
	var ids []string
	for _, p := range r.peers {
		ids = append(ids, p.ClusterID)
	}
	fmt.Fprintf(r.opts.Log, "Offloading namespace %s to %s.\n", r.ns, strings.Join(ids, ", "))
	nso := &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: r.ns, Labels: labels},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingLocalAndRemote,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: ids}}}}}},
	}
	if err := r.c.Create(sctx, nso); err != nil {
		return fmt.Errorf("create NamespaceOffloading %s/%s: %w", r.ns, nso.Name, err)
	}
	if err := poll(sctx, "the namespace offloaded to every peer", func(ctx context.Context) (bool, error) {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(nso), nso); err != nil {
			return false, err
		}
		ready := 0
		for _, cs := range nso.Status.Clusters {
			if cs.Phase == ferryv1alpha1.OffloadingReady {
				ready++
			}
		}
		return ready == len(ids), nil
	}); err != nil {
		var phases []string
		for _, cs := range nso.Status.Clusters {
			phases = append(phases, fmt.Sprintf("%s: %s", cs.ClusterID, cs.Phase))
		}
		return fmt.Errorf("%w (NamespaceOffloading %s/%s: %s)", err, r.ns, nso.Name, orNone(strings.Join(phases, ", ")))
	}

	notVirtual := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: ferryv1alpha1.LabelNodeType, Operator: corev1.NodeSelectorOpNotIn, Values: []string{ferryv1alpha1.NodeTypeVirtual}}}}}}}}
	names := []string{homeName, home2Name}
	for _, n := range names {
		if err := r.createPod(sctx, n, notVirtual); err != nil {
			return err
		}
	}
	for i, p := range r.peers {
		onPeer := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{p.ClusterID}}}}}}}}
		if err := r.createPod(sctx, awayName(i), onPeer); err != nil {
			return err
		}
		names = append(names, awayName(i))
	}
	fmt.Fprintf(r.opts.Log, "Waiting for %d agnhost pods (%s).\n", len(names), r.opts.Image)
	for _, n := range names {
		pod := &corev1.Pod{}
		if err := poll(sctx, "pod "+r.ns+"/"+n+" Ready", func(ctx context.Context) (bool, error) {
			if err := r.c.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: n}, pod); err != nil {
				return false, err
			}
			if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
				return false, fmt.Errorf("pod %s/%s ended: %s", r.ns, n, pod.Status.Phase)
			}
			return pod.Status.PodIP != "" && podReady(pod), nil
		}); err != nil {
			return fmt.Errorf("%w (%s)", err, podProblem(pod))
		}
		r.pods[n] = pod
		cl, err := openClient(sctx, r.cfg, r.ns, n, r.where(n))
		if err != nil {
			return err
		}
		r.clients[n] = cl
	}
	return nil
}

// where names a pod of the run by its cluster.
func (r *run) where(pod string) string {
	if pod == homeName || pod == home2Name {
		return r.report.Cluster
	}
	var i int
	_, _ = fmt.Sscanf(pod, "away-%d", &i)
	return r.peers[i].ClusterID
}

// createPod starts an agnhost netexec pod (HTTP and UDP) named name and a
// ClusterIP Service of the same name on port 80 for it.
func (r *run) createPod(ctx context.Context, name string, affinity *corev1.Affinity) error {
	labels := map[string]string{LabelRun: r.id, "ferry.io/test-network-pod": name}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Affinity:                      affinity,
			Containers: []corev1.Container{{
				Name: "netexec", Image: r.opts.Image, ImagePullPolicy: r.opts.PullPolicy,
				Args:           []string{"netexec", fmt.Sprintf("--http-port=%d", netexecPort), fmt.Sprintf("--udp-port=%d", netexecUDPPort)},
				Ports:          []corev1.ContainerPort{{ContainerPort: netexecPort}, {ContainerPort: netexecUDPPort, Protocol: corev1.ProtocolUDP}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(netexecPort)}}, PeriodSeconds: 1},
				Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}},
		},
	}
	if err := r.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("create pod %s/%s: %w", r.ns, name, err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{LabelRun: r.id}},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(netexecPort)}}},
	}
	if err := r.c.Create(ctx, svc); err != nil {
		return fmt.Errorf("create Service %s/%s: %w", r.ns, name, err)
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podProblem says what holds a pod back, for a setup timeout.
func podProblem(p *corev1.Pod) string {
	if p.Name == "" {
		return "not found"
	}
	var s []string
	s = append(s, "phase "+string(p.Status.Phase))
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			s = append(s, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			s = append(s, fmt.Sprintf("container %s waiting: %s %s", cs.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(s, "; ")
}

// poll calls done every 500 ms until it is true, fails, or ctx ends.
func poll(ctx context.Context, what string, done func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return false, err
		}
		last = err
		return ok, nil
	})
	if err != nil && ctx.Err() != nil {
		if last != nil {
			return fmt.Errorf("timed out waiting for %s (last: %v)", what, last)
		}
		return fmt.Errorf("timed out waiting for %s", what)
	}
	return err
}

// RemoveLeftovers removes the namespaces of earlier runs past their expiry
// (a run killed before its cleanup), with what is in them.
func RemoveLeftovers(ctx context.Context, c client.Client, log io.Writer, now time.Time) error {
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss, client.HasLabels{LabelRun}); err != nil {
		return fmt.Errorf("list namespaces of earlier runs: %w", err)
	}
	var errs []error
	for _, ns := range nss.Items {
		if !Expired(ns.Annotations[AnnotationExpires], now) {
			continue
		}
		fmt.Fprintf(log, "Removing namespace %s, left by an earlier run.\n", ns.Name)
		if err := removeNamespace(ctx, c, ns.Name, log); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Expired reports whether a run's namespace may be removed: its expiry is
// past, or unreadable (not one this command wrote whole).
func Expired(expires string, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, expires)
	return err != nil || now.After(t)
}

// removeNamespace unoffloads the namespace (its twins in the providers go
// with it), then deletes it and waits until it is gone.
func removeNamespace(ctx context.Context, c client.Client, ns string, log io.Writer) error {
	nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: ns}}
	if err := c.Delete(ctx, nso); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NamespaceOffloading %s/%s: %w", ns, nso.Name, err)
	}
	if err := poll(ctx, "namespace "+ns+" unoffloaded", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(nso), nso)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Delete(ctx, n); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", ns, err)
	}
	if err := poll(ctx, "namespace "+ns+" deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(n), n)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		return err
	}
	fmt.Fprintf(log, "Removed namespace %s and its twins.\n", ns)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no cluster reported yet"
	}
	return s
}
