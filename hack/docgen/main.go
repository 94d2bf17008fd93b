// Command docgen writes the generated reference under docs/reference (make
// generate): ferryctl's commands (cli/), the CRDs (api.md), the Helm
// chart's values (helm-values.md), every component's flags (flags/) and
// the index of them all (README.md). The pages depend only on the tree:
// no date, no environment, no build version.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

func main() {
	var c config
	flag.StringVar(&c.out, "out", "docs/reference", "folder of the reference pages")
	flag.StringVar(&c.crds, "crds", "manifests/crds", "folder of the CustomResourceDefinitions")
	flag.StringVar(&c.chart, "chart", "charts/ferry", "folder of the Helm chart (values.yaml, values.schema.json)")
	flag.Parse()
	if err := generate(c); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}
