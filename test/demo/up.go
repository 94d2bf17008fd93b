package demo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/test/crashloop"
	"github.com/ferry-io/ferry/test/testbed"
)

// Namespace is the namespace the demo offloads.
const Namespace = "demo"

// LocalNamespace is offloaded with strategy Local: its pods stay here.
const LocalNamespace = "demo-local"

// startTimeout bounds the daemon's start (clusters, components).
const startTimeout = 5 * time.Minute

// Up starts a demo in cfg.StateDir (cleaning up after a crashed one) and
// shows ferry at work, writing to out. It refuses while a demo runs in that
// folder: a demo is a place to experiment in, not replaced behind the
// user's back; another folder runs another demo beside it.
func Up(ctx context.Context, cfg Config, out io.Writer) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("--dir %s: %w", cfg.StateDir, err)
	}
	if err := refuseIfRunning(cfg.StateDir); err != nil {
		return err
	}
	lock, err := lockForUp(cfg.StateDir)
	if err != nil {
		if rerr := refuseIfRunning(cfg.StateDir); rerr != nil {
			return rerr
		}
		return err
	}
	defer lock.Close()
	if err := refuseIfRunning(cfg.StateDir); err != nil { // started while we waited for the lock
		return err
	}
	clearState(cfg.StateDir)

	what := "two local clusters"
	if cfg.Providers > 1 {
		what = fmt.Sprintf("%d local clusters (a consumer, %d providers)", cfg.Providers+1, cfg.Providers)
	}
	started := time.Now()
	fmt.Fprintln(out, "==> starting "+what+" and ferry (logs in "+filepath.Join(cfg.StateDir, daemonLog)+")")
	if err := startDaemon(cfg); err != nil {
		return err
	}
	err = showcase(ctx, cfg, out)
	fmt.Fprintf(out, "\n(ferry-demo up took %s)\n", time.Since(started).Round(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("%w\n(what runs is left for inspection, logs in %s; make demo-down stops it)", err, cfg.StateDir)
	}
	return nil
}

// showcase waits for the daemon, then peers, offloads, deploys and shows.
func showcase(ctx context.Context, cfg Config, out io.Writer) error {
	ready, err := waitReady(ctx, cfg.StateDir, out)
	if err != nil {
		return err
	}
	consumer, err := newClients(ready.ConsumerKubeconfig)
	if err != nil {
		return err
	}

	ferryctl := filepath.Join(cfg.BinDir, "ferryctl")
	providers := map[string]*clients{}
	for _, p := range ready.Providers {
		if len(ready.Providers) == 1 {
			fmt.Fprintln(out, "==> peering: the provider becomes a virtual node of the consumer")
		} else {
			fmt.Fprintf(out, "==> peering %s: it becomes the virtual node %s of the consumer\n", p.Name, virtualNodeName(p.Name))
		}
		if err := run(ctx, out, ferryctl, "peer", "--consumer-kubeconfig", ready.ConsumerKubeconfig,
			"--provider-kubeconfig", p.Kubeconfig, "--timeout", "2m"); err != nil {
			return err
		}
		if providers[p.Name], err = newClients(p.Kubeconfig); err != nil {
			return err
		}
	}

	for _, o := range []struct{ ns, strategy, scheduler string }{{Namespace, "Remote", ""}, {LocalNamespace, "Local", ""}, {SchedulerNamespace, "Remote", SchedulerName}} {
		args := []string{"offload", "namespace", o.ns, "--kubeconfig", ready.ConsumerKubeconfig,
			"--pod-offloading-strategy", o.strategy, "--wait", "--timeout", "2m"}
		if o.scheduler != "" {
			fmt.Fprintf(out, "==> offloading namespace %s with pod offloading strategy %s, its pods scheduled by %s\n", o.ns, o.strategy, o.scheduler)
			args = append(args, "--scheduler-name", o.scheduler)
		} else {
			fmt.Fprintf(out, "==> offloading namespace %s with pod offloading strategy %s\n", o.ns, o.strategy)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.ns}}
		if err := consumer.ctrl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", o.ns, err)
		}
		if err := run(ctx, out, ferryctl, args...); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "==> the provider keeps the pods of %s's twin namespace on its real node, those of %s's on its simulated nodes\n"+
		"    (a provider's own choice: the PodNodeSelector admission plugin's namespace annotation)\n", Namespace, SchedulerNamespace)
	if err := annotateTwins(ctx, out, consumer, ready.Kubectl, ready.Providers); err != nil {
		return err
	}

	fmt.Fprintf(out, "==> deploying two plain Deployments of agnhost netexec, an HTTP server (no tolerations, no affinity: ferry's webhook adds them\n"+
		"    from the namespace's policy), and the Service api: api (4 pods) in %s, web (3 pods) in %s\n", Namespace, LocalNamespace)
	for _, d := range sampleApp() {
		if err := consumer.ctrl.Create(ctx, d); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Deployment %s: %w", d.Name, err)
		}
	}
	if err := consumer.ctrl.Create(ctx, apiService()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Service api: %w", err)
	}
	pods := map[string][]corev1.Pod{}
	for ns, want := range map[string]int{Namespace: 4, LocalNamespace: 3} {
		if pods[ns], err = waitRunning(ctx, consumer, ns, want); err != nil {
			return err
		}
	}
	for _, ns := range []string{Namespace, LocalNamespace} {
		if err := printPods(ctx, out, ns, pods[ns], providers); err != nil {
			return err
		}
	}

	if err := showScheduling(ctx, out, consumer); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n==> a StatefulSet with a claim per pod in %s: ferry's webhook moves the claims to the ferry storage class,\n"+
		"    which provisions each where its first pod lands (here the provider) and keeps later pods with their data\n", Namespace)
	if err := consumer.ctrl.Create(ctx, sampleStatefulSet()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StatefulSet db: %w", err)
	}
	if _, err := waitRunning(ctx, consumer, Namespace, 4+statefulSetReplicas); err != nil {
		return err
	}
	if err := waitClaimsBound(ctx, consumer, Namespace, statefulSetReplicas); err != nil {
		return err
	}
	if err := run(ctx, out, ferryctl, "status", "--kubeconfig", ready.ConsumerKubeconfig); err != nil {
		return err
	}

	fabricErr := showRealWork(ctx, out, consumer, providers, pods)

	for _, p := range ready.Providers[1:] {
		fmt.Fprintf(out, "\n==> %s is the virtual node %s; its kubeconfig: %s\n", p.Name, virtualNodeName(p.Name), p.Kubeconfig)
	}
	fmt.Fprintf(out, `
==> the clusters keep running; explore them with kubectl:
    export KUBECONFIG=%[1]s   # the consumer (%[3]s: the provider)
    alias kubectl=%[2]s
    kubectl get nodes                       # the provider is the virtual node ferry-provider
    kubectl get pods -n %[4]s -o wide         # api-* run on ferry-provider (web-* in demo-local stay here, on %[8]s)
    kubectl get pod -n %[4]s <api pod> -o yaml  # the toleration and node affinity ferry's webhook added
    kubectl get namespaceoffloading -n %[4]s
    kubectl get events -n %[5]s              # ferry-scheduler's Scheduled and FailedScheduling (RemoteFit) events
    kubectl logs -n %[4]s <api pod>                       # netexec's log, from the provider's real node
    kubectl exec -n %[4]s <api pod> -- /agnhost etc-hosts   # runs in the api container, on the provider's real node
    kubectl exec -n %[9]s deploy/web -- /agnhost connect --timeout=3s api.%[4]s:%[10]d   # a TCP connection through the Service
    kubectl get --raw '/api/v1/namespaces/%[9]s/pods/<web pod>:%[10]d/proxy/dial?request=hostname&protocol=http&host=api.%[4]s&port=%[10]d&tries=1'
                                            # web calls http://api.%[4]s:%[10]d/hostname: the answering provider pod's name
    kubectl --kubeconfig %[3]s get shadowpods,pods -A -l ferry.io/origin-cluster=consumer
    kubectl get pvc -n %[4]s -L ferry.io/cluster-id   # where each claim's data lives
    kubectl --kubeconfig %[3]s get pvc -A -l ferry.io/origin-cluster=consumer
   %[7]s status --dir %[6]s   # ferry's components: state, PID, restarts, log
   a component that exits (kill it to try) is restarted with the kubelet's back-off;
   make demo-down (%[7]s down --dir %[6]s) stops everything.
`, ready.ConsumerKubeconfig, ready.Kubectl, ready.ProviderKubeconfig, Namespace, SchedulerNamespace, cfg.StateDir, self(),
		ready.ConsumerRealNode, LocalNamespace, httpPort)
	if fabricErr != nil {
		return fmt.Errorf("the demo did not show everything: %w", fabricErr)
	}
	return nil
}

// showRealWork shows the real containers at work: a web pod of this
// cluster calls the api Service, answered by a provider pod through the
// network fabric; kubectl exec and logs reach an offloaded api container.
// exec and logs failing fails the showcase; the call failing is returned
// (after exec and logs are shown), to fail the demo at its end.
func showRealWork(ctx context.Context, out io.Writer, consumer *clients, providers map[string]*clients, pods map[string][]corev1.Pod) error {
	var web, api *corev1.Pod
	for i, p := range pods[LocalNamespace] {
		if p.Status.Phase == corev1.PodRunning && web == nil {
			web = &pods[LocalNamespace][i]
		}
	}
	for i, p := range pods[Namespace] {
		if p.Status.Phase == corev1.PodRunning && isVirtual(p.Spec.NodeName) && api == nil {
			api = &pods[Namespace][i]
		}
	}
	if web == nil || api == nil {
		return errors.New("no Running web pod or offloaded api pod to show")
	}
	hostnames, where, err := remoteHostnames(ctx, providers, Namespace)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n==> a consumer pod calls the offloaded pods' Service: %s/%s (on this cluster's real node) asks http://%s:%d/hostname\n"+
		"    (netexec's /dial, through the API server's pod proxy): consumer pod → Service → the api pods' addresses as the consumer\n"+
		"    sees them → ferry-gateway → WireGuard → ferry-gateway → the provider's pod\n", LocalNamespace, web.Name, serviceHost(), httpPort)
	var path string
	var answer dialAnswer
	var callErr error
	for _, fc := range append([]namedClients{{consumerName, consumer}}, sortedProviders(providers)...) {
		if callErr = waitFabricPods(ctx, fc.name, fc.c); callErr != nil {
			break
		}
	}
	if callErr == nil {
		path, answer, callErr = callService(ctx, consumer, web.Name, hostnames)
	}
	if path != "" {
		fmt.Fprintf(out, "    $ kubectl get --raw '%s'\n", path)
	}
	if path == "" {
		fmt.Fprintf(out, "      FAILED before the call: %v\n", callErr)
		fmt.Fprintln(out, "      the network fabric's pods are not ready: kubectl get pods -n ferry-system (in each cluster)")
	} else if callErr != nil {
		fmt.Fprintf(out, "      FAILED: %v\n", callErr)
		fmt.Fprintln(out, "      the cross-cluster call did not get an answer from an api pod: the network fabric's data path failed (see ferry-gateway's and the route agents' logs: kubectl logs -n ferry-system deploy/ferry-gateway)")
	} else {
		fmt.Fprintf(out, "      answered %q: the hostname of the pod %s, a container on that provider's real node\n",
			answer.Responses[0], where[answer.Responses[0]])
		// Exec and logs then show the pod that answered (the provider's
		// pod has the consumer pod's name).
		for i, p := range pods[Namespace] {
			if p.Name == answer.Responses[0] {
				api = &pods[Namespace][i]
			}
		}
	}

	fmt.Fprintf(out, "\n==> kubectl exec -n %s %s -- /agnhost etc-hosts   (through the virtual kubelet to the provider's kubelet)\n", Namespace, api.Name)
	var execOut string
	var firstExecErr error
	tries := 0
	if err := retry(ctx, time.Minute, func() error {
		tries++
		execOut, err = consumer.exec(ctx, Namespace, api.Name, "/agnhost", "etc-hosts")
		if err != nil {
			return fmt.Errorf("exec in %s: %w: %s", api.Name, err, execOut)
		}
		// Seen: the first exec into an offloaded pod ending without error
		// and without the command's output (not with kubectl exec after).
		if !strings.Contains(execOut, api.Name) {
			err := fmt.Errorf("exec in %s: the output does not name the pod: %q", api.Name, execOut)
			if firstExecErr == nil {
				firstExecErr = err
			}
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprint(out, indent(execOut))
	if tries > 1 {
		fmt.Fprintf(out, "      (exec needed %d tries; the first: %v)\n", tries, firstExecErr)
	}

	fmt.Fprintf(out, "\n==> kubectl logs -n %s %s   (netexec's log, from the provider's real node)\n", Namespace, api.Name)
	var logs []byte
	if err := retry(ctx, time.Minute, func() error {
		logs, err = consumer.kube.CoreV1().Pods(Namespace).GetLogs(api.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("logs of %s: %w", api.Name, err)
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Fprint(out, indent(string(logs)))
	if callErr != nil {
		return fmt.Errorf("%s could not call the api Service across the clusters: %w", web.Name, callErr)
	}
	return nil
}

type namedClients = struct {
	name string
	c    *clients
}

// sortedProviders are the providers' clients by name.
func sortedProviders(providers map[string]*clients) []namedClients {
	var out []namedClients
	for name, c := range providers {
		out = append(out, namedClients{name, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// retry runs f every second until it succeeds or timeout passes, returning
// its last error.
func retry(ctx context.Context, timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if serr := sleep(ctx, time.Second); serr != nil {
			return err
		}
	}
}

// self is this program's path, for the commands the demo suggests.
func self() string {
	if p, err := os.Executable(); err == nil {
		return p
	}
	return "ferry-demo"
}

// startDaemon runs this program's daemon detached from the terminal and
// from make, in a session of its own, so the clusters outlive `make demo`.
func startDaemon(cfg Config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(cfg.StateDir, daemonLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, append([]string{daemonCommand}, cfg.daemonArgs()...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the demo daemon: %w", err)
	}
	return cmd.Process.Release()
}

// waitReady follows the daemon's progress until it is ready or fails.
func waitReady(ctx context.Context, dir string, out io.Writer) (*Ready, error) {
	started := time.Now()
	deadline := started.Add(startTimeout)
	shown := 0
	for {
		shown = showProgress(filepath.Join(dir, daemonLog), shown, out)
		if r, err := readReady(dir); err == nil {
			return r, nil
		}
		if msg, err := os.ReadFile(filepath.Join(dir, errorFile)); err == nil {
			return nil, fmt.Errorf("the demo could not start: %s (see %s)", msg, filepath.Join(dir, daemonLog))
		}
		if _, running := daemonPID(dir); !running && time.Since(started) > 5*time.Second {
			return nil, fmt.Errorf("the demo daemon stopped; see %s", filepath.Join(dir, daemonLog))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the demo did not start within %s; see %s", startTimeout, filepath.Join(dir, daemonLog))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// showProgress prints the daemon's progress lines after the first `shown`
// and returns how many there are.
func showProgress(path string, shown int, out io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		return shown
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		msg, ok := strings.CutPrefix(s.Text(), progressPrefix+" ")
		if !ok {
			continue
		}
		n++
		if n > shown && msg != "ready" {
			fmt.Fprintln(out, "    "+msg)
		}
	}
	return n
}

type clients struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	ctrl client.Client
}

// exec runs command in a pod's first container, as kubectl exec does, and
// returns its stdout and stderr.
func (c *clients) exec(ctx context.Context, namespace, pod string, command ...string) (string, error) {
	req := c.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	// As kubectl exec: WebSockets, SPDY where the server cannot upgrade.
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", req.URL())
	if err != nil {
		return "", err
	}
	executor, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	return out.String(), err
}

func newClients(kubeconfig string) (*clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, err
	}
	return &clients{cfg: cfg, kube: kube, ctrl: c}, nil
}

func run(ctx context.Context, out io.Writer, bin string, args ...string) error {
	fmt.Fprintf(out, "    $ %s %s\n", filepath.Base(bin), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	output, err := cmd.CombinedOutput()
	fmt.Fprint(out, indent(string(output)))
	if err != nil {
		return fmt.Errorf("%s %s: %w", filepath.Base(bin), args[0], err)
	}
	return nil
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "      " + strings.ReplaceAll(s, "\n", "\n      ") + "\n"
}

// sampleApp is two Deployments as users write them: nothing in them says
// where they run; their namespaces' policies do.
func sampleApp() []*appsv1.Deployment {
	return []*appsv1.Deployment{netexecDeployment(LocalNamespace, "web", 3, "100m"), netexecDeployment(Namespace, "api", 4, "100m")}
}

// plainDeployment is a Deployment of replicas pods of one container that
// requests cpu and 128Mi of memory, with no placement of its own: agnhost
// pause (imported in every real node; kwok plays it on simulated nodes).
func plainDeployment(namespace, name string, replicas int32, cpu string) *appsv1.Deployment {
	return deploymentOf(namespace, name, replicas, agnhostContainer(name, cpu, "pause"))
}

// netexecDeployment is a plainDeployment whose container is an HTTP server
// (agnhost netexec on httpPort, Ready once it serves).
func netexecDeployment(namespace, name string, replicas int32, cpu string) *appsv1.Deployment {
	return deploymentOf(namespace, name, replicas, agnhostContainer(name, cpu, "netexec", fmt.Sprintf("--http-port=%d", httpPort)))
}

func deploymentOf(namespace, name string, replicas int32, c corev1.Container) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{c}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
}

// statefulSetReplicas is the demo StatefulSet's size.
const statefulSetReplicas = 2

// sampleStatefulSet is a database as users write it: a claim per pod from a
// template, of the cluster's default class.
func sampleStatefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	replicas := int32(statefulSetReplicas)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "db", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever, Args: []string{"pause"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
		},
	}
}

// waitClaimsBound waits for want claims of namespace to be bound, those in
// a provider bound there too.
func waitClaimsBound(ctx context.Context, c *clients, namespace string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var pvcs corev1.PersistentVolumeClaimList
		if err := c.ctrl.List(ctx, &pvcs, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("list claims of %s: %w", namespace, err)
		}
		bound := 0
		for _, p := range pvcs.Items {
			if p.Status.Phase != corev1.ClaimBound {
				continue
			}
			var pv corev1.PersistentVolume
			if err := c.ctrl.Get(ctx, client.ObjectKey{Name: p.Spec.VolumeName}, &pv); err != nil {
				return fmt.Errorf("read volume of claim %s/%s: %w", namespace, p.Name, err)
			}
			if placement.VolumeCluster(&pv) == placement.LocalCluster || pv.Annotations[storage.AnnotationRemotePhase] == string(corev1.ClaimBound) {
				bound++
			}
		}
		if bound >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d claims of %s bound: %w", bound, want, namespace, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitRunning(ctx context.Context, c *clients, namespace string, want int) ([]corev1.Pod, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var list corev1.PodList
		if err := c.ctrl.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		if running >= want {
			return list.Items, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("only %d of %d pods of namespace %s are Running after 3m", running, want, namespace)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func isVirtual(node string) bool { return strings.HasPrefix(node, "ferry-") }

// virtualNodeName is the consumer's node standing for the provider cluster.
func virtualNodeName(cluster string) string {
	return peering.VirtualNodeName(ferryv1alpha1.ClusterID(cluster))
}

// printPods shows each pod's node and, for offloaded ones, the pod that
// runs it in its provider.
func printPods(ctx context.Context, out io.Writer, namespace string, pods []corev1.Pod, providers map[string]*clients) error {
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	type remotePod struct {
		provider string
		pod      corev1.Pod
	}
	byUID := map[string]remotePod{}
	for name, provider := range providers {
		var remote corev1.PodList
		if err := provider.ctrl.List(ctx, &remote, client.MatchingLabels{ferryv1alpha1.LabelOriginNamespace: namespace}); err != nil {
			return fmt.Errorf("list pods of %s in %s: %w", namespace, name, err)
		}
		for _, r := range remote.Items {
			byUID[r.Labels[ferryv1alpha1.LabelOriginUID]] = remotePod{provider: name, pod: r}
		}
	}
	fmt.Fprintf(out, "\n==> pods of namespace %s, as the consumer sees them\n", namespace)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "    POD\tSTATUS\tIP\tNODE\tRUNS IN")
	for _, p := range pods {
		where := "this cluster"
		if isVirtual(p.Spec.NodeName) {
			where = "provider (not there yet)"
			if r, ok := byUID[string(p.UID)]; ok {
				// The IP the consumer shows is the provider's, remapped by
				// the network fabric (all clusters use one pod CIDR).
				where = fmt.Sprintf("%s: %s/%s on %s, IP %s there", r.provider, r.pod.Namespace, r.pod.Name, r.pod.Spec.NodeName, r.pod.Status.PodIP)
			}
		}
		fmt.Fprintf(w, "    %s\t%s\t%s\t%s\t%s\n", p.Name, p.Status.Phase, p.Status.PodIP, p.Spec.NodeName, where)
	}
	return w.Flush()
}

// Status prints the demo of cfg.StateDir: its daemon and each of ferry's
// components (state, PID, restarts, log).
func Status(cfg Config, out io.Writer) error {
	pid, running := daemonPID(cfg.StateDir)
	if !running {
		fmt.Fprintf(out, "no demo is running in %s\n", cfg.StateDir)
		return nil
	}
	fmt.Fprintf(out, "demo in %s, daemon PID %d\n", cfg.StateDir, pid)
	data, err := os.ReadFile(filepath.Join(cfg.StateDir, statusFile))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(out, "starting: no component status yet; see "+filepath.Join(cfg.StateDir, daemonLog))
		return nil
	}
	if err != nil {
		return err
	}
	var st daemonStatus
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(cfg.StateDir, statusFile), err)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "COMPONENT\tSTATE\tPID\tRESTARTS\tLAST EXIT\tLOG")
	for _, c := range st.Components {
		state, pid := string(c.Phase), "-"
		if c.PID != 0 {
			pid = strconv.Itoa(c.PID)
		}
		if c.Phase == crashloop.PhaseBackOff {
			state += fmt.Sprintf(" (restart in %s)", time.Until(c.RestartAt).Round(time.Second))
		}
		last := c.LastExit
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", c.Name, state, pid, c.Restarts, last, c.Log)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "ferry-gateway and the route agents run as pods of each cluster: kubectl --kubeconfig %s get pods -n ferry-system\n",
		filepath.Join(cfg.StateDir, "<cluster>.kubeconfig"))
	return nil
}

// Down stops the demo whose state is in dir: its daemon ends the
// components and clusters it started. Only that process is signalled.
func Down(cfg Config, out io.Writer) error {
	pid, running := daemonPID(cfg.StateDir)
	if !running {
		clearState(cfg.StateDir)
		fmt.Fprintln(out, "no demo is running")
		return nil
	}
	fmt.Fprintf(out, "stopping the demo (daemon PID %d)\n", pid)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal the demo daemon %d: %w", pid, err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if _, running := daemonPID(cfg.StateDir); !running {
			clearState(cfg.StateDir)
			fmt.Fprintln(out, "the demo is stopped")
			return nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Its clusters and components die with it (parent-death signal).
	_ = syscall.Kill(pid, syscall.SIGKILL)
	clearState(cfg.StateDir)
	fmt.Fprintln(out, "the demo did not stop within 90s and was killed")
	return nil
}
