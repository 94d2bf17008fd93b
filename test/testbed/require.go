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
	var missing error
	if os.Geteuid() != 0 {
		missing = errors.New("real nodes need root")
	} else if err := NodePackages(); err != nil {
		missing = err
	} else {
		for _, name := range binaries.NamesOf(binaries.Node) {
			if _, err := binaries.Path(name); err != nil {
				missing = err
				break
			}
		}
	}
	if missing == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(missing)
	}
	t.Skip(missing)
}
