package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// Options of one benchmark run.
type Options struct {
	// Shapes are the load shapes, run in order, each a direct run then an
	// offloaded one; their pods stay until the end.
	Shapes []Shape
	// RepoRoot is ferry's source tree: manifests/base is installed from it
	// and ferry-virtual-kubelet is built from it.
	RepoRoot string
	// Out receives the progress lines and, last, the RESULT lines.
	Out io.Writer
	// Claims makes every pod a StatefulSet's, with a claim of its own
	// (bench-storage): both clusters get the test bed's provisioner, the
	// consumer ferry's storage class (manifests/storage), and the offloaded
	// claims ask for it as ferry's PVC webhook would have them ask. Only
	// with one shape.
	Claims bool
	// Replicas is each StatefulSet's size when Claims is set.
	Replicas int
	// PlacementPreference, when LocalFirst or RemoteFirst, offloads the
	// namespace LocalAndRemote with it (pods still select the virtual
	// node), so the cost of the pods' pod-deletion-cost shows.
	PlacementPreference ferryv1alpha1.PlacementPreference
}

func (o Options) validate() error {
	if len(o.Shapes) == 0 {
		return errors.New("no load shape to run")
	}
	for _, s := range o.Shapes {
		if err := s.validate(); err != nil {
			return err
		}
	}
	if o.Claims && len(o.Shapes) != 1 {
		return fmt.Errorf("-claims runs one shape, not %d", len(o.Shapes))
	}
	if o.Claims && (o.Replicas < 1 || o.Shapes[0].Pods%o.Replicas != 0) {
		return fmt.Errorf("-replicas %d: must be at least 1 and divide -pods %d", o.Replicas, o.Shapes[0].Pods)
	}
	if _, err := os.Stat(filepath.Join(o.RepoRoot, "go.mod")); err != nil {
		return fmt.Errorf("%s is not ferry's source tree (run from the repository root, e.g. make bench-offload): %w", o.RepoRoot, err)
	}
	return nil
}

// totalPods is the pods of every shape's run of one kind.
func (o Options) totalPods() int {
	n := 0
	for _, s := range o.Shapes {
		n += s.Pods
	}
	return n
}

const (
	consumerID ferryv1alpha1.ClusterID = "consumer"
	providerID ferryv1alpha1.ClusterID = "provider"
	// benchNamespace is the consumer's offloaded namespace.
	benchNamespace = "bench"
	// directNamespace is the provider's namespace of the direct run.
	directNamespace = "direct"
)

// Run starts two clusters with ferry, peers and offloads, measures the
// direct run and then the offloaded run, and prints the RESULT line. Every
// process it starts is stopped before it returns, also when ctx ends
// (Ctrl-C); the clusters' folders are removed unless FERRY_TESTBED_KEEP is set.
func Run(ctx context.Context, opts Options) (err error) {
	if err := opts.validate(); err != nil {
		return err
	}
	say := progress(opts.Out)

	total := opts.totalPods()
	say("starting clusters: consumer (1 node) and provider (%d nodes of %d pods)", providerNodes, podsPerNode(total))
	clusters, err := testbed.StartClusters(ctx, consumerOptions(opts.Claims), providerOptions(total, opts.Claims))
	if err != nil {
		return err
	}
	consumer, provider := clusters[0], clusters[1]
	defer func() {
		if err != nil && os.Getenv(testbed.EnvKeep) == "" {
			say("removing the cluster folders; set %s=1 to keep their logs", testbed.EnvKeep)
		}
		for _, c := range clusters {
			err = errors.Join(err, c.Stop())
		}
	}()
	if os.Getenv(testbed.EnvKeep) != "" {
		say("%s is set: the cluster folders (logs, etcd data) stay: %s %s", testbed.EnvKeep, consumer.Dir, provider.Dir)
	}
	vkBinary, cleanup, err := prepareFerry(ctx, clusters, opts.RepoRoot, say)
	if err != nil {
		return err
	}
	defer cleanup()
	if opts.Claims {
		if err := consumer.ApplyKustomization(ctx, filepath.Join(opts.RepoRoot, "manifests", "storage")); err != nil {
			return err
		}
	}

	say("starting ferry in both clusters and peering them with ferryctl")
	kubelets := &peering.ProcessLauncher{Binary: vkBinary, Kubeconfig: consumer.KubeconfigPath, LogDir: consumer.Dir}
	for _, f := range []struct {
		c        *testbed.Cluster
		id       ferryv1alpha1.ClusterID
		launcher *peering.ProcessLauncher
	}{
		{consumer, consumerID, kubelets},
		{provider, providerID, &peering.ProcessLauncher{Binary: vkBinary, Kubeconfig: provider.KubeconfigPath, LogDir: provider.Dir}},
	} {
		stop, err := startFerry(ctx, f.c, f.id, f.launcher)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	if err := peer(ctx, consumer, provider); err != nil {
		return err
	}

	say("offloading namespace %s", benchNamespace)
	twin, err := offloadNamespace(ctx, consumer, benchNamespace, opts.PlacementPreference)
	if err != nil {
		return err
	}
	say("namespace %s is offloaded to provider namespace %s", benchNamespace, twin)
	if err := createNamespace(ctx, provider, directNamespace); err != nil {
		return err
	}

	vn := types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.VirtualNodeName(providerID)}
	b := &bench{opts: opts, consumer: consumer, provider: provider, twin: twin, say: say,
		cpu: func() (cpuSample, error) {
			return sampleCPU(clusters, map[string]int{"virtual-kubelet": kubelets.PID(vn)})
		},
		kubeletPID: func() int { return kubelets.PID(vn) },
	}
	var results []Result
	for _, shape := range opts.Shapes {
		res, err := b.runShape(ctx, shape)
		if err != nil {
			return fmt.Errorf("shape %s: %w", shape.Name, err)
		}
		results = append(results, res)
	}

	work, err := controllersWork()
	if err != nil {
		return err
	}
	for _, w := range work {
		say("controller %-20s %5d reconciles, mean %4.0fms each, mean queue wait %5.0fms", w.name, w.reconciles, w.meanReconcile*1000, w.meanWait*1000)
	}
	for _, res := range results {
		res.Print(opts.Out)
	}
	return nil
}

// bench is a running benchmark's clusters and meters.
type bench struct {
	opts               Options
	consumer, provider *testbed.Cluster
	// twin is the provider namespace of the consumer's benchNamespace.
	twin string
	say  func(string, ...any)
	// cpu samples the CPU time of every test-bed process.
	cpu func() (cpuSample, error)
	// kubeletPID is the virtual kubelet's process.
	kubeletPID func() int
	// offloaded is how many pods the offloaded runs so far made.
	offloaded int
}

// runShape measures one shape: its direct run, then its offloaded run.
func (b *bench) runShape(ctx context.Context, shape Shape) (Result, error) {
	opts, say := b.opts, b.say
	pods := float64(shape.Pods)
	res := Result{Shape: shape, Claims: opts.Claims}

	say("%s, direct run in provider namespace %s", shape, directNamespace)
	cpuBefore, err := b.cpu()
	if err != nil {
		return res, err
	}
	direct, err := podRun{
		name: "direct-" + shape.Name, cluster: b.provider, namespace: directNamespace, spec: podSpec(),
		shape: shape, counted: []*testbed.Cluster{b.provider}, claims: directClaims(opts),
	}.measure(ctx, say)
	if err != nil {
		return res, err
	}
	cpuAfter, err := b.cpu()
	if err != nil {
		return res, err
	}
	directCPU := cpuAfter.since(cpuBefore)
	direct.report(say)
	say("direct-%s run CPU per pod: %.2f ms, by process (ms): %s", shape.Name, directCPU.total()*1000/pods, directCPU.perPod(shape.Pods))

	if err := waitVirtualNodeRoom(ctx, b.consumer, b.offloaded+shape.Pods); err != nil {
		return res, err
	}
	if cpuBefore, err = b.cpu(); err != nil {
		return res, err
	}
	workBefore, err := controllersWork()
	if err != nil {
		return res, err
	}
	memory, err := sampleMemory(b.kubeletPID(), memorySamplePeriod)
	if err != nil {
		return res, fmt.Errorf("virtual kubelet: %w", err)
	}
	say("%s, offloaded run in consumer namespace %s", shape, benchNamespace)
	offloaded, err := podRun{
		name: "offload-" + shape.Name, cluster: b.consumer, namespace: benchNamespace, spec: offloadedPodSpec(),
		shape: shape, counted: []*testbed.Cluster{b.consumer, b.provider},
		twin: b.provider, twinNamespace: b.twin, claims: offloadedClaims(opts),
	}.measure(ctx, say)
	peakRSS, lastRSS, memErr := memory.stop()
	if err != nil {
		return res, err
	}
	if memErr != nil {
		return res, fmt.Errorf("virtual kubelet: %w", memErr)
	}
	b.offloaded += shape.Pods
	if cpuAfter, err = b.cpu(); err != nil {
		return res, err
	}
	workAfter, err := controllersWork()
	if err != nil {
		return res, err
	}
	offloadCPU := cpuAfter.since(cpuBefore)
	offloaded.report(say)
	say("offload-%s run CPU per pod: %.2f ms, by process (ms): %s", shape.Name, offloadCPU.total()*1000/pods, offloadCPU.perPod(shape.Pods))
	if p := opts.PlacementPreference; p != "" && p != ferryv1alpha1.PlacementPreferenceNone {
		var list corev1.PodList
		if err := b.consumer.Client.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
			return res, fmt.Errorf("list pods of %s: %w", benchNamespace, err)
		}
		costs := map[string]int{}
		for _, pod := range list.Items {
			costs[pod.Annotations[placement.AnnotationPodDeletionCost]]++
		}
		say("offload-%s pods by %s (placement preference %s; \"\" = none): %v", shape.Name, placement.AnnotationPodDeletionCost, p, costs)
	}
	if opts.Claims {
		n, err := checkClaimsInProvider(ctx, b.consumer, b.provider, benchNamespace, b.twin)
		if err != nil {
			return res, err
		}
		say("claims: all %d offloaded claims bound to volumes of provider %s, their provider claims Bound in %s", n, providerID, b.twin)
	}
	anon, file, err := memory.split()
	if err != nil {
		return res, fmt.Errorf("virtual kubelet: %w", err)
	}
	say("virtual kubelet memory with %d offloaded pods: peak %d MiB (VmHWM), %d MiB at the end: %d MiB anonymous (heap, stacks), %d MiB of mapped files (its binary's pages)",
		b.offloaded, peakRSS>>20, lastRSS>>20, anon>>20, file>>20)

	res.Direct, res.Offload, res.VirtualKubeletPeakRSS = direct.stats(), offloaded.stats(), peakRSS
	res.Direct.CPUSecondsPerPod = directCPU.total() / pods
	res.Offload.CPUSecondsPerPod = offloadCPU.total() / pods
	res.Offload.ShadowPodReconcilesPerPod = float64(reconciles(workAfter, "shadowpod")-reconciles(workBefore, "shadowpod")) / pods
	return res, nil
}
