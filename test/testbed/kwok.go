package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// KwokNodeAnnotation marks the nodes kwok manages. The test bed only asks kwok
// to manage nodes carrying it, so a virtual kubelet's node is left alone.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// startKwok runs kwok with the stages shipped in kwok's own module (node
// initialization, heartbeat with leases, pods Running and Ready at once,
// completion and deletion): a node it manages behaves like a healthy
// kubelet's, at the version pinned in go.mod.
func (c *Cluster) startKwok(pki *credentials, port int) error {
	stages := strings.Join([]string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}, "\n---\n")
	config := filepath.Join(c.Dir, "kwok.yaml")
	if err := os.WriteFile(config, []byte(stages), 0o600); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	home := filepath.Join(c.Dir, "kwok-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("create kwok home: %w", err)
	}
	return c.start(binaries.Kwok, []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--config=" + config,
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--cidr=" + c.opts.PodCIDR,
		"--node-ip=127.0.0.1",
		fmt.Sprintf("--server-address=127.0.0.1:%d", port),
		fmt.Sprintf("--node-port=%d", port),
		"--tls-cert-file=" + pki.kwokServing.CertFile,
		"--tls-private-key-file=" + pki.kwokServing.KeyFile,
		"--node-lease-duration-seconds=40",
	}, []string{
		// kwok also reads ~/.kwok/kwok.yaml when it exists; a home of its own
		// keeps a developer's kwok setup out of the tests.
		"HOME=" + home,
	})
}
