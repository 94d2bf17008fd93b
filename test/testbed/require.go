package testbed

import (
	"errors"
	"os"
	"testing"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// RequireBinaries skips a test that needs the test bed when its control-plane
// binaries are missing (run `make testbed`), and fails it under CI, where
// `make test` builds them first and a missing one means a broken setup.
func RequireBinaries(t testing.TB) {
	t.Helper()
	for _, name := range binaries.NamesOf(binaries.ControlPlane) {
		if _, err := binaries.Path(name); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatal(err)
			}
			t.Skip(err)
		}
	}
}

// RequireRealNodes skips a test that needs real nodes when it cannot have
// them (not root, or the binaries or machine packages missing), and fails
// it under CI, where `make test` provides them.
func RequireRealNodes(t testing.TB) {
	t.Helper()
	RequireBinaries(t)
	missing := RealNodesAvailable()
	if missing == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
}

// RealNodesAvailable says why this machine cannot run real nodes (not root,
// the machine packages or the node binaries missing), or nil.
func RealNodesAvailable() error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root")
	}
	if err := NodePackages(); err != nil {
		return err
	}
	for _, name := range binaries.NamesOf(binaries.Node) {
		if _, err := binaries.Path(name); err != nil {
			return err
		}
	}
	return nil
}
