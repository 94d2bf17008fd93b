package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// UserKubeconfig issues a client certificate for user (with groups) from the
// cluster's CA and writes a kubeconfig for it, for tests of what an identity
// may and may not do. It returns the file's path and its rest.Config.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, *rest.Config, error) {
	file := "user-" + filepath.Base(user)
	kp, err := c.ca.issue(c.Dir, file, user, groups, false, nil, nil)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(c.Dir, file+".kubeconfig")
	cfg, err := writeKubeconfig(path, c.Name, c.APIServerURL, c.ca.certPEM, kp)
	if err != nil {
		return "", nil, err
	}
	return path, cfg, nil
}

// CAPEM is the cluster's CA certificate: it signs the API server's serving
// certificate, client certificates and CSRs.
func (c *Cluster) CAPEM() []byte { return c.ca.certPEM }

// Kubectl runs the test bed's kubectl against the cluster as admin and
// returns its standard output; on failure the error holds standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := binaries.Path(binaries.Kubectl)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + c.KubeconfigPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %v on %s: %w: %s", args, c.Name, err, stderr.String())
	}
	return stdout.String(), nil
}
