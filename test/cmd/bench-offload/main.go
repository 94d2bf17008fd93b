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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/test/perf/offload"
)

func main() {
	exit := 0
	defer func() { os.Exit(exit) }()
	opts := offload.Options{Out: os.Stdout}
	flag.IntVar(&opts.Pods, "pods", 1000, "pods created in each run, direct and offloaded")
	flag.IntVar(&opts.Concurrency, "concurrency", 32, "create calls in flight at once")
	flag.BoolVar(&opts.Claims, "claims", false, "pods of StatefulSets with a claim each, offloaded through ferry's storage class (make bench-storage)")
	flag.IntVar(&opts.Replicas, "replicas", 10, "pods per StatefulSet with -claims")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of the whole run")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (ferry's controller managers run in it) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-offload:", err)
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
	if err == nil {
		opts.RepoRoot = root
		err = offload.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-offload:", err)
		exit = 1
	}
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
