// Command bench-offload measures pod offloading against running the same pods
// directly in the provider, on two test-bed clusters (`make bench-offload`;
// with -claims, StatefulSet pods with claims: `make bench-storage`), and
// prints a RESULT line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/test/perf/offload"
	"github.com/ferry-io/ferry/test/perf/profile"
)

func main() {
	exit := 0
	defer func() { os.Exit(exit) }()
	opts := offload.Options{Out: os.Stdout}
	pods := flag.Int("pods", 1000, "pods created in each run of the burst shape (with -claims, of the one run), direct and offloaded")
	concurrency := flag.Int("concurrency", 32, "create calls in flight at once in the burst and rate shapes")
	shapes := flag.String("shapes", "burst,rate,paced", "load shapes to run, in this order: burst (-pods at once, -concurrency in flight), rate (1000 pods at 100/s), paced (100 pods at 2/s, one at a time); -claims runs burst only")
	flag.BoolVar(&opts.Claims, "claims", false, "pods of StatefulSets with a claim each, offloaded through ferry's storage class (make bench-storage)")
	flag.IntVar(&opts.Replicas, "replicas", 10, "pods per StatefulSet with -claims")
	flag.StringVar((*string)(&opts.PlacementPreference), "placement-preference", "", "offload the namespace LocalAndRemote with this placement preference (LocalFirst, RemoteFirst); the pods still select the virtual node, and carry the preference's pod-deletion-cost")
	namespaces := flag.Int("namespaces", 1, "with more than 1 (or -providers above 1): the scale run instead of the shapes, -pods pods over this many offloaded namespaces (make bench-offload-scale)")
	providers := flag.Int("providers", 1, "with more than 1 (or -namespaces above 1): the scale run, with this many providers peered")
	restarts := flag.Bool("restarts", false, "the scale run's restarts instead of its figures: with -pods pods Running, SIGKILL a virtual kubelet, then the consumer's and the first provider's controller managers, then stop the first provider's API server for 20s; a RESULT restart line each (convergence, Lease wait, LIST/WATCH requests, pods recreated or lost)")
	clusterRead := flag.Bool("cluster-read", true, "in the scale run, providers bind ferry-reflection-reader to the consumer, so that its virtual kubelets watch them cluster-wide")
	scale := flag.Bool("scale", false, "the scale run (make bench-offload-scale) even with one provider and one namespace")
	direct := flag.Bool("direct", true, "in the scale run, first the same pods directly in the providers: the baseline of time_ratio")
	steady := flag.Duration("steady", 10*time.Minute, "in the scale run, the window at rest after all pods are Running: writes by program (the API servers' audit logs), memory growth; 0 skips it")
	curve := flag.String("curve", "", "scale runs one after the other at these sizes, PROVIDERSxPODS[/NAMESPACES] (default -namespaces), comma-separated, e.g. 1x1000,1x3000,1x10000,3x3000,10x10000/100; then the fits (make bench-offload-curve)")
	fit := flag.String("fit", "", "no run: fit the RESULT scale lines of these files (outputs of earlier scale runs), comma-separated")
	predict := flag.String("predict", "100x100000/1000", "with -curve or -fit: evaluate each fit at this size, PROVIDERSxPODS/NAMESPACES (empty: none)")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of the whole run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (ferry's controller managers run in it) to this file")
	flag.Parse()
	if opts.Claims && !flagSet("shapes") {
		*shapes = offload.ShapeBurst
	}
	var err error
	if opts.Shapes, err = offload.SelectShapes(offload.DefaultShapes(*pods, *concurrency), *shapes); err != nil {
		fmt.Fprintln(os.Stderr, "bench-offload:", err)
		os.Exit(2)
	}
	if *cpuProfile != "" {
		stopProfile, err := profile.StartCPU(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-offload: -cpuprofile:", err)
			os.Exit(1)
		}
		defer stopProfile()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once; the children die with us
	}()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	root, err := os.Getwd()
	switch {
	case err != nil:
	case *fit != "":
		err = offload.FitScaleResults(os.Stdout, strings.Split(*fit, ","), *predict)
	case *curve != "":
		err = offload.RunCurve(ctx, offload.CurveOptions{Sizes: strings.Split(*curve, ","), Predict: *predict, Scale: offload.ScaleOptions{
			Namespaces: *namespaces, Concurrency: *concurrency, ClusterRead: *clusterRead, Direct: *direct, Steady: *steady, RepoRoot: root, Out: os.Stdout}})
	case *scale || *namespaces > 1 || *providers > 1 || *restarts:
		err = offload.RunScale(ctx, offload.ScaleOptions{Pods: *pods, Namespaces: *namespaces, Providers: *providers,
			Concurrency: *concurrency, ClusterRead: *clusterRead, Direct: *direct, Steady: *steady, Restarts: *restarts, RepoRoot: root, Out: os.Stdout})
	default:
		opts.RepoRoot = root
		err = offload.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-offload:", err)
		exit = 1
	}
}

// flagSet tells whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
