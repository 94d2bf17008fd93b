// Package e2e holds ferry's end-to-end specs, run on real test-bed clusters.
// Every spec carries a label naming its feature, so one area runs alone:
//
//	make test-e2e LABELS=testbed
package e2e

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ferry-io/ferry/test/netlab"
)

// reportMargin is how long before go test's deadline the suite gives up,
// so Ginkgo can still name the spec that hung, show where it waits, run
// the cleanups (stopping every cluster) and print its summary; go test's
// own timeout would only dump goroutines.
const reportMargin = 3 * time.Minute

// TestMain runs the suite, as root, in a network namespace of its own:
// the test bed's servers listen on its loopback, and the network fabric's
// specs build their nodes and pods as namespaces inside it, so no packet
// of theirs can reach the host's network.
func TestMain(m *testing.M) { netlab.Main(m) }

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's Eventually given a context but no timeout waits as long as
	// the context lives: with a spec's context, forever. Every wait here
	// names its timeout; one that forgets gets the short default and fails
	// at once instead of hanging the suite.
	EnforceDefaultTimeoutsWhenUsingContexts()
	// The in-process controller managers log to the spec's output, which
	// Ginkgo shows for a failed spec (and for all with -ginkgo.v).
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(false)))
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if deadline, ok := t.Deadline(); ok {
		if left := time.Until(deadline) - reportMargin; left > 0 && left < suiteConfig.Timeout {
			suiteConfig.Timeout = left
		}
	}
	// A spec still running after this long reports where it is, once a
	// minute, so a slow or stuck spec shows up in the log as it happens.
	if suiteConfig.PollProgressAfter == 0 {
		suiteConfig.PollProgressAfter = 4 * time.Minute
		suiteConfig.PollProgressInterval = time.Minute
	}
	RunSpecs(t, "ferry end-to-end", suiteConfig, reporterConfig)
}
