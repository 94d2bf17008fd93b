// Command ferry-virtual-kubelet serves one VirtualNode: it registers, in the
// local (consumer) cluster, the virtual Node standing for a peered provider
// cluster, keeps it alive and truthful, and runs the pods bound to it in the
// provider. ferry's controller manager runs
// one per VirtualNode.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/ferry-io/ferry/cmd/ferry-virtual-kubelet/app"
	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/virtualkubelet/node"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
)

// gcPercent is the garbage collector's target unless GOGC is set: the heap
// may grow half its live size between collections instead of the whole. The
// live heap is mostly informer caches of the node's pods; with the default
// 100, the 1000-pod burst (make bench-offload) peaked at 49 MiB anonymous,
// with 50 at 40 MiB, for about 1 ms more of its CPU per offloaded pod
// (5.5 against 4.7 ms, on a loaded machine).
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	var f app.Flags
	fs, showVersion := app.NewFlagSet(&f, pflag.ExitOnError)
	_ = fs.Parse(os.Args[1:])
	showVersion.ExitIfSet("ferry-virtual-kubelet")
	opts, workers, policies, scope := f.Opts, f.Workers, f.Policies, f.Scope
	opts.RemoteScope = remotescope.Scope(scope)
	if len(workers) > 0 {
		opts.Reflection.Workers = map[reflection.Kind]int{}
		for k, n := range workers {
			opts.Reflection.Workers[reflection.Kind(k)] = n
		}
	}
	if len(policies) > 0 {
		opts.Reflection.Policies = map[reflection.Kind]reflection.Policy{}
		for k, p := range policies {
			opts.Reflection.Policies[reflection.Kind(k)] = reflection.Policy(p)
		}
	}
	if !fs.Changed("health-check-timeout") {
		opts.HealthCheckTimeout = 0 // the default, at most --health-check-period
	}

	if err := run(f.Kubeconfig, opts); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, "ferry-virtual-kubelet:", err)
		os.Exit(1)
	}
	klog.Flush()
}

func run(kubeconfigPath string, opts node.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	cfg, err := kubeconfig.ForComponent("--kubeconfig", kubeconfigPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	return node.Run(ctx, cfg, opts)
}
