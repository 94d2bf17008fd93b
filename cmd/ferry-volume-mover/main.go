// Command ferry-volume-mover copies a volume's files between two pods for
// `ferryctl move volume`: serve on the source side, fetch on the target
// side, relay between two providers. See package storage/mover.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ferry-io/ferry/storage/mover"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := mover.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
