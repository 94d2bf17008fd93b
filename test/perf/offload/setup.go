package offload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/cmd/ferryctl/app"
	"github.com/ferry-io/ferry/controllers/controllermanager"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// providerNodes is the provider's node count: the direct run's pods spread
// over several nodes, as in a real cluster.
const providerNodes = 10

func consumerOptions(storage bool) testbed.Options {
	return testbed.Options{Name: string(consumerID), ControllerManager: true, Scheduler: true, Kwok: true, Storage: storage,
		Nodes: []testbed.NodePool{{Name: "local", Count: 1}}}
}

func providerOptions(pods int, storage bool) testbed.Options {
	return testbed.Options{Name: string(providerID), ControllerManager: true, Scheduler: true, Kwok: true, Storage: storage,
		Nodes: []testbed.NodePool{{Name: "worker", Count: providerNodes, CPU: "64", Memory: "256Gi", Pods: podsPerNode(pods)}}}
}

// podsPerNode sizes the provider's nodes so that, with the direct run's
// pods still there, the virtual node's grant (90% of the free pod slots)
// still holds every offloaded pod: 0.9 × (10 × (n/4+20) − n) ≥ n.
func podsPerNode(pods int) int {
	return max(110, pods/4+20)
}

// podSpec is the direct run's pod: one tiny container, no placement rules.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{
		Name: "app", Image: "registry.example/app:v1",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}},
	}}}
}

// offloadedPodSpec is the same pod, placed on ferry's virtual node (as the
// admission webhook will do for pods of offloaded namespaces).
func offloadedPodSpec() corev1.PodSpec {
	spec := podSpec()
	spec.NodeSelector = map[string]string{ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}
	spec.Tolerations = []corev1.Toleration{{Key: ferryv1alpha1.TaintVirtualNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	return spec
}

// logFerryTo sends the logs of the in-process controller managers and
// clients (controller-runtime and klog) to a file, keeping the terminal for
// progress lines.
func logFerryTo(path string) (closeLog func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open ferry's log: %w", err)
	}
	var mu sync.Mutex
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{})
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		_ = f.Close()
	}, nil
}

// buildVirtualKubelet builds ferry-virtual-kubelet into a temporary folder;
// remove deletes it.
func buildVirtualKubelet(ctx context.Context, root string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "ferry-bench-vk-")
	if err != nil {
		return "", nil, fmt.Errorf("create folder for ferry-virtual-kubelet: %w", err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "ferry-virtual-kubelet")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/ferry-virtual-kubelet")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("build ferry-virtual-kubelet: %w\n%s", err, out)
	}
	return bin, remove, nil
}

// progress prints progress lines to out, each with the seconds since the
// run began.
func progress(out io.Writer) func(format string, args ...any) {
	begin := time.Now()
	return func(format string, args ...any) {
		fmt.Fprintf(out, "[%6.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}
}

// prepareFerry installs ferry's base manifests in every cluster, sends
// ferry's logs to the first cluster's folder and builds the virtual
// kubelet; cleanup closes the log and removes the binary.
func prepareFerry(ctx context.Context, clusters []*testbed.Cluster, root string, say func(string, ...any)) (vkBinary string, cleanup func(), err error) {
	for _, c := range clusters {
		if err := c.ApplyKustomization(ctx, filepath.Join(root, "manifests", "base")); err != nil {
			return "", nil, err
		}
	}
	closeLog, err := logFerryTo(filepath.Join(clusters[0].Dir, "ferry-controller-managers.log"))
	if err != nil {
		return "", nil, err
	}
	say("building ferry-virtual-kubelet")
	vkBinary, removeBinary, err := buildVirtualKubelet(ctx, root)
	if err != nil {
		closeLog()
		return "", nil, err
	}
	return vkBinary, func() { removeBinary(); closeLog() }, nil
}

// startFerry runs ferry's controller manager for c in-process, as
// ferry-controller-manager would, until stop is called; stop also ends the
// virtual kubelets it launched.
func startFerry(ctx context.Context, c *testbed.Cluster, id ferryv1alpha1.ClusterID, launcher *peering.ProcessLauncher) (stop func() error, err error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mgr, err := controllermanager.New(runCtx, rest.CopyConfig(c.Config), controllermanager.Options{
		ClusterID: id, SharingPercentage: 90, GrantDebounce: 2 * time.Second, Launcher: launcher,
		Network: fabricctrl.Options{PodCIDR: c.PodCIDR()}, MetricsAddr: "0", HealthAddr: "0", SeveralPerProcess: true,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("start ferry in %s: %w", c.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	return func() error {
		cancel()
		err := <-done
		launcher.StopAll(context.Background())
		if err != nil {
			return fmt.Errorf("ferry in %s: %w", c.Name, err)
		}
		return nil
	}, nil
}

// peer runs `ferryctl peer` in-process, as a user would on the command line.
func peer(ctx context.Context, consumer, provider *testbed.Cluster) error {
	var out bytes.Buffer
	cmd := app.NewCommand()
	cmd.SetArgs([]string{"peer", "--consumer-kubeconfig", consumer.KubeconfigPath, "--provider-kubeconfig", provider.KubeconfigPath, "--timeout", "90s"})
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	if err := cmd.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("ferryctl peer: %w\n%s", err, out.String())
	}
	return nil
}

// createNamespace creates a namespace and waits for its default service
// account, without which the API server refuses pods.
func createNamespace(ctx context.Context, c *testbed.Cluster, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("create namespace %s in %s: %w", name, c.Name, err)
	}
	return poll(ctx, 30*time.Second, fmt.Sprintf("service account %s/default in %s", name, c.Name), func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// offloadNamespace creates namespace in the consumer with a
// NamespaceOffloading (Remote), waits until the provider's twin namespace is
// Ready and returns its name.
func offloadNamespace(ctx context.Context, consumer *testbed.Cluster, namespace string, pref ferryv1alpha1.PlacementPreference) (twin string, err error) {
	twins, err := offloadNamespaceWith(ctx, consumer, namespace, pref, providerID)
	return twins[providerID], err
}

// offloadNamespaceTo creates namespace in the consumer with a
// NamespaceOffloading (Remote), waits until the twin namespace of each of
// providers is Ready and returns their names.
func offloadNamespaceTo(ctx context.Context, consumer *testbed.Cluster, namespace string, providers ...ferryv1alpha1.ClusterID) (map[ferryv1alpha1.ClusterID]string, error) {
	return offloadNamespaceWith(ctx, consumer, namespace, "", providers...)
}

// offloadNamespaceWith is offloadNamespaceTo with a placement preference:
// other than None or empty, the NamespaceOffloading is LocalAndRemote with
// it (the pods still select virtual nodes), so their virtual kubelet gives
// them its pod-deletion-cost.
func offloadNamespaceWith(ctx context.Context, consumer *testbed.Cluster, namespace string, pref ferryv1alpha1.PlacementPreference, providers ...ferryv1alpha1.ClusterID) (map[ferryv1alpha1.ClusterID]string, error) {
	if err := createNamespace(ctx, consumer, namespace); err != nil {
		return nil, err
	}
	nso := &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace},
		Spec:       ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote},
	}
	if pref != "" && pref != ferryv1alpha1.PlacementPreferenceNone {
		nso.Spec.PodOffloadingStrategy, nso.Spec.PlacementPreference = ferryv1alpha1.PodOffloadingLocalAndRemote, pref
	}
	if err := consumer.Client.Create(ctx, nso); err != nil {
		return nil, fmt.Errorf("create NamespaceOffloading %s/%s: %w", namespace, nso.Name, err)
	}
	twins := map[ferryv1alpha1.ClusterID]string{}
	err := poll(ctx, 60*time.Second, fmt.Sprintf("NamespaceOffloading %s/%s to show %v Ready", namespace, nso.Name, providers), func(ctx context.Context) (bool, error) {
		if err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(nso), nso); err != nil {
			return false, err
		}
		for _, c := range nso.Status.Clusters {
			if slices.Contains(providers, c.ClusterID) && c.Phase == ferryv1alpha1.OffloadingReady {
				twins[c.ClusterID] = c.TwinNamespace
			}
		}
		return len(twins) == len(providers), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w; last status: %+v", err, nso.Status)
	}
	return twins, nil
}

// waitVirtualNodeRoom waits until the consumer's virtual node is Ready and
// allows at least pods pods, so that the offloaded run measures ferry, not a
// grant too small.
func waitVirtualNodeRoom(ctx context.Context, consumer *testbed.Cluster, pods int) error {
	return waitVirtualNodeRoomOf(ctx, consumer, "", pods)
}

// waitVirtualNodeRoomOf waits until the consumer's virtual node name (any,
// when empty) is Ready and allows at least pods pods.
func waitVirtualNodeRoomOf(ctx context.Context, consumer *testbed.Cluster, name string, pods int) error {
	var last string
	err := poll(ctx, 60*time.Second, fmt.Sprintf("a Ready virtual node %s with room for %d pods", name, pods), func(ctx context.Context) (bool, error) {
		nodes, err := consumer.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: ferryv1alpha1.LabelNodeType + "=" + ferryv1alpha1.NodeTypeVirtual})
		if err != nil {
			return false, err
		}
		var found []string
		for _, n := range nodes.Items {
			room := n.Status.Allocatable.Pods().Value()
			found = append(found, fmt.Sprintf("%s (ready %t, %d pods)", n.Name, nodeReady(&n), room))
			if (name == "" || n.Name == name) && nodeReady(&n) && room >= int64(pods) {
				return true, nil
			}
		}
		last = strings.Join(found, ", ")
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%w; virtual nodes: [%s]", err, last)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// poll checks done every 200ms until it is true or fails, for at most
// timeout; the timeout error names what was awaited.
func poll(ctx context.Context, timeout time.Duration, what string, done func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return ok, err
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}
