// Command bench-offload measures pod offloading against running the same pods
// directly in the provider, on two test-bed clusters (`make bench-offload`),
// and prints a RESULT line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/test/perf/offload"
)

func main() {
	opts := offload.Options{Out: os.Stdout}
	flag.IntVar(&opts.Pods, "pods", 1000, "pods created in each run, direct and offloaded")
	flag.IntVar(&opts.Concurrency, "concurrency", 32, "create calls in flight at once")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of the whole run")
	flag.Parse()

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
		os.Exit(1)
	}
}
