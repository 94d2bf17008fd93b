// Command bench-webhook measures what ferry's pod webhooks add to pod
// creation on a test-bed cluster (`make bench-webhook`) and prints a RESULT
// line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/test/perf/webhook"
)

func main() {
	opts := webhook.Options{Out: os.Stdout}
	flag.IntVar(&opts.Pods, "pods", 2000, "pods created in each namespace (with and without the webhooks)")
	flag.IntVar(&opts.Concurrency, "concurrency", 32, "create calls in flight at once")
	flag.IntVar(&opts.Rounds, "rounds", 4, "rounds alternating the two namespaces")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound of the whole run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	root, err := os.Getwd()
	if err == nil {
		opts.RepoRoot = root
		err = webhook.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-webhook:", err)
		cancel()
		os.Exit(1)
	}
}
