package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"

	"github.com/ferry-io/ferry/test/testbed/binaries"
)

// KwokNodeAnnotation marks the nodes kwok manages. The test bed only asks kwok
// to manage nodes carrying it, so a virtual kubelet's node is left alone.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// KwokResizeLabel, set to "true" on a pod, makes kwok run it as a kubelet
// that resizes pods in place does (kwok v0.8.0 alone does not): each
// running container's status.containerStatuses[].resources (and
// allocatedResources) follows its spec, at once after a resize. The API
// server accepts a resize only of a pod whose running containers report
// their resources. Opt-in, so other pods cost no extra status write.
const KwokResizeLabel = "testbed.ferry.io/in-place-resize"

// kwokPodResize is the Stage behind KwokResizeLabel. A resize is done the
// moment it is seen: kwok sets no PodResizePending or PodResizeInProgress
// condition.
var kwokPodResize = fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-resize
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.labels["%[1]s"]'
      operator: In
      values: ["true"]
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist
    - key: '.status.phase'
      operator: In
      values: ["Running"]
    - key: '[.spec.containers[] | {name, resources}] == [.status.containerStatuses[]? | {name, resources}]'
      operator: In
      values: ["false"]
  next:
    patches:
    - subresource: status
      root: status
      type: merge
      template: |
        containerStatuses:
        {{- $spec := .spec.containers }}
        {{- range $s := .status.containerStatuses }}
        {{- range $c := $spec }}
        {{- if eq $c.name $s.name }}
        - {{ toJson (merge (dict "resources" $c.resources "allocatedResources" (default (dict) $c.resources.requests)) $s) }}
        {{- end }}
        {{- end }}
        {{- end }}
`, KwokResizeLabel)

// KwokPodLogFile is, in a cluster's Dir, the file every kwok pod's
// containers log, in the CRI log format (kubectl logs reads it, -f follows
// it as it grows; attach starts from it). AppendPodLog makes pods log.
const KwokPodLogFile = "kwok-pod.log"

// KwokExecDir is, in a cluster's Dir, the working directory of commands
// exec'd in kwok pods: kwok runs them as local processes of its own.
const KwokExecDir = "kwok-exec"

// kwokDebugging gives kwok's pods behaviour for the kubelet API: logs and
// attach from KwokPodLogFile, exec as local processes in KwokExecDir, and
// port-forward to `cat` (an echo on every port).
func kwokDebugging(dir string) string {
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: testbed
spec:
  logs:
  - logsFile: %[1]q
    follow: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata:
  name: testbed
spec:
  attaches:
  - logsFile: %[1]q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: testbed
spec:
  execs:
  - local:
      workDir: %[2]q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: testbed
spec:
  forwards:
  - command: ["cat"]
`, filepath.Join(dir, KwokPodLogFile), filepath.Join(dir, KwokExecDir))
}

// startKwok runs kwok with the stages shipped in kwok's own module (node
// initialization, heartbeat with leases, pods Running and Ready at once,
// completion and deletion) and the test bed's in-place resize of pods
// labelled KwokResizeLabel: a node it manages behaves like a healthy
// kubelet's, at the version pinned in go.mod.
func (c *Cluster) startKwok(pki *credentials, port int) error {
	stages := strings.Join([]string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
		kwokPodResize,
		kwokDebugging(c.Dir),
	}, "\n---\n")
	if err := os.MkdirAll(filepath.Join(c.Dir, KwokExecDir), 0o700); err != nil {
		return fmt.Errorf("create kwok exec dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, KwokPodLogFile), nil, 0o600); err != nil {
		return fmt.Errorf("write kwok pod log: %w", err)
	}
	if err := c.AppendPodLog("kwok pod started"); err != nil {
		return err
	}
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

// AppendPodLog adds a line to what every kwok pod of the cluster logs on
// stdout, as a container runtime writes it (CRI log format).
func (c *Cluster) AppendPodLog(line string) error {
	f, err := os.OpenFile(filepath.Join(c.Dir, KwokPodLogFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("cluster %s: append to the pods' log: %w", c.Name, err)
	}
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster %s: append to the pods' log: %w", c.Name, err)
	}
	return nil
}
