package realbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	corev1 "k8s.io/api/core/v1"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/images"
)

// ProbeImage runs test/realbed/probe (its subcommand and flags as the
// container's args): an HTTP server and TCP sink, and clients that time
// requests and a stream from inside a pod.
const ProbeImage = ImageRegistry + "/probe:" + ImageTag

// BuildProbeImage builds test/realbed/probe, static for linux/amd64, from
// the module at root into dir, and writes ProbeImage holding it as an
// archive there for Options.Images. It returns the archive's path.
func BuildProbeImage(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "probe")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/realbed/probe")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build test/realbed/probe: %w\n%s", err, out)
	}
	path := filepath.Join(dir, "probe-image.tar")
	if err := images.WriteBinaryImage(ProbeImage, bin, path); err != nil {
		return "", err
	}
	return path, nil
}

// OffloadNamespace offloads namespace of c to provider alone, with pod
// offloading strategy Remote, and returns its twin namespace there once it
// is Ready (within a minute).
func OffloadNamespace(ctx context.Context, c *testbed.Cluster, namespace string, provider ferryv1alpha1.ClusterID) (string, error) {
	if err := c.Client.Create(ctx, &ferryv1alpha1.NamespaceOffloading{
		ObjectMeta: metav1.ObjectMeta{Name: ferryv1alpha1.NamespaceOffloadingName, Namespace: namespace},
		Spec: ferryv1alpha1.NamespaceOffloadingSpec{PodOffloadingStrategy: ferryv1alpha1.PodOffloadingRemote,
			ClusterSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: ferryv1alpha1.LabelClusterID, Operator: corev1.NodeSelectorOpIn, Values: []string{string(provider)}}}}}}},
	}); err != nil {
		return "", fmt.Errorf("offload namespace %s: %w", namespace, err)
	}
	var twin string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var nso ferryv1alpha1.NamespaceOffloading
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ferryv1alpha1.NamespaceOffloadingName}, &nso); err != nil {
			return false, nil
		}
		for _, cl := range nso.Status.Clusters {
			if cl.ClusterID == provider && cl.Phase == ferryv1alpha1.OffloadingReady {
				twin = cl.TwinNamespace
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return "", fmt.Errorf("namespace %s offloaded to %s: not Ready: %w", namespace, provider, err)
	}
	return twin, nil
}
