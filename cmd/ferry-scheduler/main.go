// Command ferry-scheduler is kube-scheduler with ferry's plugins
// (ClusterSelector, RemoteFit, DataGravity) registered; a
// KubeSchedulerConfiguration enables them in a profile. It takes every
// kube-scheduler flag.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/ferry-io/ferry/kubeconfig"
	"github.com/ferry-io/ferry/plugins/registry"
	"github.com/ferry-io/ferry/version"
)

func main() {
	// kube-scheduler's own --version names the Kubernetes version the
	// scheduler was built from; ferry's comes first.
	if slices.Contains(os.Args[1:], "--version") || slices.Contains(os.Args[1:], "--version=true") {
		fmt.Println("ferry-scheduler", version.Get())
		fmt.Println("kube-scheduler", version.Dependency("k8s.io/kubernetes"))
		return
	}
	legacyregistry.RawMustRegister(version.Collector("ferry-scheduler"))
	var opts []app.Option
	for name, factory := range registry.Registry() {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	command := app.NewSchedulerCommand(opts...)
	command.Use = "ferry-scheduler"
	// kube-scheduler's error when it finds no kubeconfig names
	// KUBERNETES_MASTER, which it does not read either.
	run := command.RunE
	command.RunE = func(cmd *cobra.Command, args []string) error {
		return kubeconfig.Explain("--kubeconfig (or clientConnection.kubeconfig in --config)", run(cmd, args))
	}
	os.Exit(cli.Run(command))
}
