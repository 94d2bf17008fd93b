// Command testbed builds the control-plane binaries ferry's tests run
// (`make testbed`), into a versioned cache folder; a no-op when present.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err == nil {
		err = binaries.Ensure(ctx, root, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}
