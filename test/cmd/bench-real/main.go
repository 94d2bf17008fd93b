// Command bench-real measures offloading on real nodes (`make bench-real`):
// pod start offloaded vs. direct, request latency and TCP throughput from a
// consumer pod to offloaded pods vs. from a provider pod to the same pods;
// it prints a RESULT line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferry-io/ferry/test/perf/realnodes"
	"github.com/ferry-io/ferry/test/testbed"
)

func main() {
	opts := realnodes.Options{Out: os.Stdout}
	flag.IntVar(&opts.Pods, "pods", 30, "pods of each kind (offloaded, direct) the start measurement creates, a pair at a time")
	flag.DurationVar(&opts.StartInterval, "start-interval", time.Second, "time between two pairs of pods; 0: each pair once the one before is Ready (paced, no pod waits behind another)")
	flag.IntVar(&opts.Requests, "requests", 1500, "HTTP requests timed per side")
	flag.IntVar(&opts.Rounds, "rounds", 3, "rounds the requests are split into, alternating which side goes first")
	flag.DurationVar(&opts.Stream, "stream", 5*time.Second, "length of each TCP stream")
	flag.IntVar(&opts.StreamRounds, "stream-rounds", 2, "TCP streams per side, alternating which side goes first")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of the whole run")
	flag.Parse()
	if opts.Pods < 1 || opts.Requests < 1 || opts.Rounds < 1 || opts.StreamRounds < 1 || opts.Stream <= 0 || opts.StartInterval < 0 {
		fmt.Fprintln(os.Stderr, "bench-real: -pods, -requests, -rounds, -stream-rounds and -stream must be positive, -start-interval not negative")
		os.Exit(2)
	}
	if err := realNodesPossible(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-real:", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	root, err := os.Getwd()
	if err == nil {
		opts.RepoRoot = root
		err = realnodes.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-real:", err)
		cancel()
		stop()
		os.Exit(1)
	}
}

// realNodesPossible is nil when this machine can start real nodes.
func realNodesPossible() error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root")
	}
	if err := testbed.NodePackages(); err != nil {
		return fmt.Errorf("%w (make node-packages)", err)
	}
	return nil
}
