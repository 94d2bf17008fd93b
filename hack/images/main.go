// Command images builds ferry's container images without a container
// engine (make images): each component is a static Go binary, cross-compiled
// for every platform, alone in an image on an empty base, running as a
// non-root user; one multi-platform index per component, all written to one
// OCI image layout and, with -registry, pushed. Builds are reproducible: the
// same source, version and commit give the same digests.
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
	flag.StringVar(&opts.version, "version", "devel", "version linked into the binaries and the images' tag")
	flag.StringVar(&opts.commit, "commit", "", "commit linked into the binaries")
	flag.StringVar(&opts.out, "out", filepath.Join("bin", "images"), "OCI image layout written (replaced)")
	flag.StringVar(&opts.registry, "registry", "", "push every image index as <registry>/<component>:<version> (empty: no push)")
	components := flag.String("components", strings.Join(Components, ","), "components to build, from ./cmd/")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "platforms of every image")
	flag.Parse()
	opts.components = splitList(*components)
	var err error
	if opts.platforms, err = parsePlatforms(*platforms); err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		err = run(ctx, opts, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
