// Command ferry-scheduler is kube-scheduler with ferry's plugins
// (ClusterSelector, RemoteFit, DataGravity) registered; a
// KubeSchedulerConfiguration enables them in a profile. It takes every
// kube-scheduler flag.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/ferry-io/ferry/plugins/registry"
)

func main() {
	var opts []app.Option
	for name, factory := range registry.Registry() {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	command := app.NewSchedulerCommand(opts...)
	command.Use = "ferry-scheduler"
	os.Exit(cli.Run(command))
}
