// Package crossbuild compiles ferry's binaries the way every release
// artefact is built (make images, make dist): static (no cgo), for any
// GOOS/GOARCH, reproducible (no paths, build ID or VCS stamp of this
// machine), with the version and commit linked in.
package crossbuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Build compiles the package pkg (e.g. ./cmd/ferryctl) for goos/goarch into
// out.
func Build(ctx context.Context, pkg, goos, goarch, version, commit, out string) error {
	ldflags := fmt.Sprintf("-s -w -buildid= -X github.com/ferry-io/ferry/version.version=%s -X github.com/ferry-io/ferry/version.commit=%s", version, commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if o, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s for %s/%s: %w\n%s", pkg, goos, goarch, err, o)
	}
	return nil
}

// Prepare empties the output folder out (removed, so nothing of a previous
// run stays) and makes a scratch folder for the binaries; done removes it.
func Prepare(out string) (scratch string, done func(), err error) {
	if err := os.RemoveAll(out); err != nil {
		return "", nil, fmt.Errorf("-out %s: %w", out, err)
	}
	scratch, err = os.MkdirTemp("", "ferry-build-")
	if err != nil {
		return "", nil, err
	}
	return scratch, func() { _ = os.RemoveAll(scratch) }, nil
}
