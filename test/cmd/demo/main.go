// Command demo is ferry's playground (bin/ferry-demo): `up` (make demo)
// starts local clusters with ferry and shows pods offloaded; `status` shows
// ferry's components; `down` (make demo-down) stops them.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/ferry-io/ferry/test/demo"
)

const usage = "usage: ferry-demo up|status|down [flags]"

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	fs := pflag.NewFlagSet("ferry-demo "+os.Args[1], pflag.ContinueOnError)
	var cfg demo.Config
	cfg.AddFlags(fs)
	if err := fs.Parse(os.Args[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		fail(err)
	}
	if fs.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q; %s", fs.Args(), usage))
	}
	if err := cfg.Complete(); err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "up":
		err = demo.Up(ctx, cfg, os.Stdout)
	case "status":
		err = demo.Status(cfg, os.Stdout)
	case "down":
		err = demo.Down(cfg, os.Stdout)
	case "daemon":
		err = demo.RunDaemon(cfg)
	default:
		err = fmt.Errorf("unknown command %q; %s", os.Args[1], usage)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ferry-demo:", err)
	os.Exit(1)
}
