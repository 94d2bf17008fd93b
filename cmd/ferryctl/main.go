// Command ferryctl peers Kubernetes clusters with ferry and shows peerings.
// Installed on the PATH as kubectl-ferry, it also runs as `kubectl ferry`.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ferry-io/ferry/cmd/ferryctl/app"
)

func main() {
	if err := app.NewCommand().ExecuteContext(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "ferryctl:", err)
		os.Exit(1)
	}
}
