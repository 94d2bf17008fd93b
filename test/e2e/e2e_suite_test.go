// Package e2e holds ferry's end-to-end specs, run on real test-bed clusters.
// Every spec carries a label naming its feature, so one area runs alone:
//
//	make test-e2e LABELS=testbed
package e2e

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "ferry end-to-end")
}
