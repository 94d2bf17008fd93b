// Package e2e holds ferry's end-to-end specs, run on real test-bed clusters.
// Every spec carries a label naming its feature, so one area runs alone:
//
//	make test-e2e LABELS=testbed
package e2e

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// The in-process controller managers log to the spec's output, which
	// Ginkgo shows for a failed spec (and for all with -ginkgo.v).
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(false)))
	RunSpecs(t, "ferry end-to-end")
}
