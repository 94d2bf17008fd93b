package testbed

import (
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
