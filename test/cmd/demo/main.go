// Command demo is ferry's playground: `demo up` (make demo) starts two local
// clusters with ferry and shows pods offloaded; `demo down` (make
// demo-down) stops them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/ferry-io/ferry/test/demo"
)

func main() {
	fs := pflag.NewFlagSet("demo", pflag.ExitOnError)
	var cfg demo.Config
	fs.StringVar(&cfg.StateDir, "state-dir", ".demo", "folder for the demo's state, logs and kubeconfigs")
	fs.StringVar(&cfg.BinDir, "bin-dir", "bin", "folder of ferry's binaries (make build)")
	fs.StringVar(&cfg.RepoRoot, "repo-root", ".", "ferry's source tree (for manifests/)")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [flags]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	for _, p := range []*string{&cfg.StateDir, &cfg.BinDir, &cfg.RepoRoot} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "up":
		err = demo.Up(ctx, cfg, os.Stdout)
	case "down":
		err = demo.Down(cfg, os.Stdout)
	case "daemon":
		err = demo.RunDaemon(cfg)
	default:
		err = fmt.Errorf("unknown command %q: up or down", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
