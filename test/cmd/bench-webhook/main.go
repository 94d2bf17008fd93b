// Command bench-webhook measures what placing pods adds to pod creation on
// a test-bed cluster (`make bench-webhook`): by ferry's pod webhook, by the
// admission policies in the API server, or both in one run, and prints a
// RESULT line.
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

	"github.com/ferry-io/ferry/test/localwebhook"
	"github.com/ferry-io/ferry/test/perf/webhook"
)

func main() {
	opts := webhook.Options{Out: os.Stdout}
	flag.IntVar(&opts.Pods, "pods", 2000, "pods created in each namespace (unplaced and each placement's)")
	flag.IntVar(&opts.Concurrency, "concurrency", 32, "create calls in flight at once")
	flag.IntVar(&opts.Rounds, "rounds", 4, "rounds alternating the namespaces")
	placements := flag.String("placement", "webhook,policy", "placements measured, comma-separated: webhook (ferry-webhook's pod webhook), policy (admission policies in the API server)")
	flag.StringVar(&opts.CPUProfile, "cpuprofile", "", "write a CPU profile of this process (ferry-webhook and the load generator) over the measured rounds to this file")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound of the whole run")
	flag.Parse()
	err := parsePlacements(*placements, &opts)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err == nil {
		opts.RepoRoot, err = os.Getwd()
	}
	if err == nil {
		err = webhook.Run(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-webhook:", err)
		cancel()
		os.Exit(1)
	}
}

func parsePlacements(s string, opts *webhook.Options) error {
	for _, name := range strings.Split(s, ",") {
		p, err := localwebhook.ParsePlacement(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("-placement: %w", err)
		}
		opts.Placements = append(opts.Placements, p)
	}
	return nil
}
