// Command testbed builds the programs ferry's tests run (`make testbed`):
// the control plane, and kubelet, kube-proxy, agnhost and coredns for real
// nodes, into a versioned cache folder, then the images real nodes import
// (agnhost, the pod sandbox, CoreDNS) as docker-archive tarballs beside them;
// a no-op when present.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-io/ferry/test/testbed/binaries"
	"github.com/ferry-io/ferry/test/testbed/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err == nil {
		err = binaries.Ensure(ctx, root, os.Stdout)
	}
	if err == nil {
		_, err = images.Ensure(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}
