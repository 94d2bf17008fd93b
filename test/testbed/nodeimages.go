package testbed

import (
	"io"

	"github.com/ferry-io/ferry/test/testbed/images"
)

// Images every real node has, imported into its containerd (nothing is
// ever pulled).
const (
	// AgnhostImage is Kubernetes' e2e test image: pass a subcommand as the
	// container's args (netexec, serve-hostname, pause, dns…).
	AgnhostImage = images.AgnhostImage
	// SandboxImage is containerd's pod sandbox (agnhost pause).
	SandboxImage = images.PauseImage
	// CoreDNSImage is the cluster DNS.
	CoreDNSImage = images.CoreDNSImage
)

// realNodeImages returns the archives to import into each real node: the
// test bed's own (built from the cached binaries when missing) and extra.
func realNodeImages(extra []string) ([]string, error) {
	tarballs, err := images.Ensure(io.Discard)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(tarballs)+len(extra))
	for _, t := range tarballs {
		out = append(out, t.Path)
	}
	return append(out, extra...), nil
}
