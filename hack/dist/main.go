// Command dist builds ferryctl's release archives without a container
// engine or network (make dist): kubectl-ferry (ferryctl under the name
// kubectl runs as a plugin) cross-compiled for every platform, one
// reproducible tar.gz each (same source, version and commit: same bytes),
// their SHA256SUMS, and the krew plugin manifest ferry.yaml naming each
// archive's URL and digest, for `kubectl krew install --manifest`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
)

func main() {
	var opts options
	flag.StringVar(&opts.version, "version", "devel", "version linked into ferryctl and the manifest's spec.version (krew wants vMAJOR.MINOR.PATCH)")
	flag.StringVar(&opts.commit, "commit", "", "commit linked into ferryctl")
	flag.StringVar(&opts.out, "out", filepath.Join("bin", "dist"), "folder written (replaced)")
	flag.StringVar(&opts.urlBase, "url-base", "", "where the archives are published (default: https://github.com/ferry-io/ferry/releases/download/<version>)")
	platforms := flag.String("platforms", strings.Join(defaultPlatforms, ","), "os/arch of the archives")
	flag.Parse()
	if opts.urlBase == "" {
		opts.urlBase = "https://github.com/ferry-io/ferry/releases/download/" + opts.version
	}
	var err error
	if opts.platforms, err = parsePlatforms(*platforms); err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		err = run(ctx, opts, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}
