package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/test/testbed"
)

// Options of one benchmark run.
type Options struct {
	// Pods created in each of the two runs, direct and offloaded.
	Pods int
	// Concurrency of the create calls.
	Concurrency int
	// RepoRoot is ferry's source tree: manifests/base is installed from it
	// and ferry-virtual-kubelet is built from it.
	RepoRoot string
	// Out receives the progress lines and, last, the RESULT line.
	Out io.Writer
	// Claims makes every pod a StatefulSet's, with a claim of its own
	// (bench-storage): both clusters get the test bed's provisioner, the
	// consumer ferry's storage class (manifests/storage), and the offloaded
	// claims ask for it as ferry's PVC webhook would have them ask.
	Claims bool
	// Replicas is each StatefulSet's size when Claims is set.
	Replicas int
}

func (o Options) validate() error {
	if o.Pods < 1 {
		return fmt.Errorf("-pods %d: must be at least 1", o.Pods)
	}
	if o.Concurrency < 1 {
		return fmt.Errorf("-concurrency %d: must be at least 1", o.Concurrency)
	}
	if o.Claims && (o.Replicas < 1 || o.Pods%o.Replicas != 0) {
		return fmt.Errorf("-replicas %d: must be at least 1 and divide -pods %d", o.Replicas, o.Pods)
	}
	if _, err := os.Stat(filepath.Join(o.RepoRoot, "go.mod")); err != nil {
		return fmt.Errorf("%s is not ferry's source tree (run from the repository root, e.g. make bench-offload): %w", o.RepoRoot, err)
	}
	return nil
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
	begin := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(opts.Out, "[%6.1fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
	}

	say("starting clusters: consumer (1 node) and provider (%d nodes of %d pods)", providerNodes, podsPerNode(opts.Pods))
	clusters, err := testbed.StartClusters(ctx, consumerOptions(opts.Claims), providerOptions(opts.Pods, opts.Claims))
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
	for _, c := range clusters {
		if err := c.ApplyKustomization(ctx, filepath.Join(opts.RepoRoot, "manifests", "base")); err != nil {
			return err
		}
	}
	if opts.Claims {
		if err := consumer.ApplyKustomization(ctx, filepath.Join(opts.RepoRoot, "manifests", "storage")); err != nil {
			return err
		}
	}
	closeLog, err := logFerryTo(filepath.Join(consumer.Dir, "ferry-controller-managers.log"))
	if err != nil {
		return err
	}
	defer closeLog()

	say("building ferry-virtual-kubelet")
	vkBinary, removeBinary, err := buildVirtualKubelet(ctx, opts.RepoRoot)
	if err != nil {
		return err
	}
	defer removeBinary()

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
	twin, err := offloadNamespace(ctx, consumer, benchNamespace)
	if err != nil {
		return err
	}
	say("namespace %s is offloaded to provider namespace %s", benchNamespace, twin)
	if err := createNamespace(ctx, provider, directNamespace); err != nil {
		return err
	}

	vn := types.NamespacedName{Namespace: ferryv1alpha1.SystemNamespace, Name: peering.VirtualNodeName(providerID)}
	cpuOf := func() (cpuSample, error) {
		return sampleCPU(clusters, map[string]int{"virtual-kubelet": kubelets.PID(vn)})
	}
	cpuBefore, err := cpuOf()
	if err != nil {
		return err
	}
	say("direct run: %d pods in provider namespace %s, %d create calls at a time", opts.Pods, directNamespace, opts.Concurrency)
	direct, err := podRun{
		name: "direct", cluster: provider, namespace: directNamespace, spec: podSpec(),
		pods: opts.Pods, concurrency: opts.Concurrency, counted: []*testbed.Cluster{provider},
		claims: directClaims(opts),
	}.measure(ctx, say)
	if err != nil {
		return err
	}
	cpuAfter, err := cpuOf()
	if err != nil {
		return err
	}
	directCPU := cpuAfter.since(cpuBefore)
	direct.report(say)
	say("direct run CPU per pod: %.2f ms, by process (ms): %s", directCPU.total()*1000/float64(opts.Pods), directCPU.perPod(opts.Pods))

	if err := waitVirtualNodeRoom(ctx, consumer, opts.Pods); err != nil {
		return err
	}
	if cpuBefore, err = cpuOf(); err != nil {
		return err
	}
	memory, err := sampleMemory(kubelets.PID(vn), memorySamplePeriod)
	if err != nil {
		return fmt.Errorf("virtual kubelet %s: %w", vn, err)
	}
	say("offloaded run: %d pods in consumer namespace %s, %d create calls at a time", opts.Pods, benchNamespace, opts.Concurrency)
	offloaded, err := podRun{
		name: "offload", cluster: consumer, namespace: benchNamespace, spec: offloadedPodSpec(),
		pods: opts.Pods, concurrency: opts.Concurrency, counted: []*testbed.Cluster{consumer, provider},
		twin: provider, twinNamespace: twin, claims: offloadedClaims(opts),
	}.measure(ctx, say)
	peakRSS, lastRSS, memErr := memory.stop()
	if err != nil {
		return err
	}
	if memErr != nil {
		return fmt.Errorf("virtual kubelet %s: %w", vn, memErr)
	}
	if cpuAfter, err = cpuOf(); err != nil {
		return err
	}
	offloadCPU := cpuAfter.since(cpuBefore)
	offloaded.report(say)
	say("offloaded run CPU per pod: %.2f ms, by process (ms): %s", offloadCPU.total()*1000/float64(opts.Pods), offloadCPU.perPod(opts.Pods))
	if opts.Claims {
		n, err := checkClaimsInProvider(ctx, consumer, provider, benchNamespace, twin)
		if err != nil {
			return err
		}
		say("claims: all %d offloaded claims bound to volumes of provider %s, their provider claims Bound in %s", n, providerID, twin)
	}
	say("virtual kubelet memory: peak %d MiB (VmHWM), %d MiB at the end", peakRSS>>20, lastRSS>>20)

	work, err := controllersWork()
	if err != nil {
		return err
	}
	for _, w := range work {
		say("controller %-20s %5d reconciles, mean %4.0fms each, mean queue wait %5.0fms", w.name, w.reconciles, w.meanReconcile*1000, w.meanWait*1000)
	}
	res := Result{Pods: opts.Pods, Claims: opts.Claims, Direct: direct.stats(), Offload: offloaded.stats(), VirtualKubeletPeakRSS: peakRSS}
	res.Direct.CPUSecondsPerPod = directCPU.total() / float64(opts.Pods)
	res.Offload.CPUSecondsPerPod = offloadCPU.total() / float64(opts.Pods)
	res.Print(opts.Out)
	return nil
}
