package testbed_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/test/testbed/hostpath"
)

// TestRealNodeStorage runs Options.Storage on a real node: a claim of the
// default class is provisioned on the node the pod was scheduled to, pinned
// by the hostname label its kubelet set, and the real kubelet mounts the
// volume's directory into the container, so a file the container writes is
// in the directory the volume names on this machine, and one written there
// is read in the container. Deleting pod and claim removes the directory.
func TestRealNodeStorage(t *testing.T) {
	testbed.RequireRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	c, err := testbed.Start(ctx, testbed.Options{Name: "realsto", RealNodes: 1, Storage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Log(c.Logs(40))
			for _, n := range c.RealNodes {
				t.Log(n.Logs(40))
			}
		}
		_ = c.Stop()
	}()
	kube := c.Kube.CoreV1()
	const ns = "default"

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := kube.PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: testbed.AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args:         []string{"pause"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
			}}},
		},
	}
	if _, err := kube.Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "pod app Running", func() error {
		p, err := kube.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod app is %s: %+v", p.Status.Phase, p.Status.Conditions)
		}
		pod = p
		return nil
	})
	if pod.Spec.NodeName != c.RealNodes[0].Name {
		t.Fatalf("pod app runs on %q, want the real node %s", pod.Spec.NodeName, c.RealNodes[0].Name)
	}

	claim, err = kube.PersistentVolumeClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(claim.Spec.StorageClassName, ""); got != testbed.StorageClassStandard || claim.Spec.VolumeName == "" {
		t.Fatalf("claim data: class %q, volume %q; want bound, of the default class %s", got, claim.Spec.VolumeName, testbed.StorageClassStandard)
	}
	pv, err := kube.PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := kube.Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The real kubelet labels its node with its hostname; the volume is
	// pinned by that label, so the scheduler keeps later pods of the claim
	// on this node.
	hostname := node.Labels[corev1.LabelHostname]
	if hostname == "" {
		t.Fatalf("node %s has no %s label: %v", node.Name, corev1.LabelHostname, node.Labels)
	}
	if got := hostpath.PinnedNode(pv); got != hostname {
		t.Errorf("volume %s is pinned to %s=%q (affinity %+v), want node %s's label %q", pv.Name, corev1.LabelHostname, got, pv.Spec.NodeAffinity, node.Name, hostname)
	}
	dir := filepath.Join(c.Dir, testbed.VolumesDir, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Fatalf("volume %s has source %+v, want hostPath %s", pv.Name, pv.Spec.PersistentVolumeSource, dir)
	}

	// The container writes; the file is in the volume's directory here.
	out, err := c.Exec(ctx, ns, pod.Name, "/agnhost", "mounttest", "--new_file_0644=/data/from-pod")
	if err != nil {
		t.Fatalf("write /data/from-pod in the container: %v: %s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "from-pod"))
	if err != nil {
		t.Fatalf("the file the container wrote is not in volume %s's directory: %v", pv.Name, err)
	}
	if want := "mount-tester new file\n"; string(got) != want {
		t.Errorf("%s/from-pod holds %q, want what the container wrote, %q", dir, got, want)
	}
	// Written here; the container reads it.
	const fromHost = "written on the test machine into volume "
	if err := os.WriteFile(filepath.Join(dir, "from-host"), []byte(fromHost+pv.Name), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = execPrinting(ctx, t, c, ns, pod.Name, "/agnhost", "mounttest", "--file_content=/data/from-host")
	if err != nil || !strings.Contains(out, fromHost+pv.Name) {
		t.Errorf("read /data/from-host in the container: %v: %q, want %q", err, out, fromHost+pv.Name)
	}
	// The container's /data is the node's mount of that directory, not a
	// folder in the container's own root.
	out, err = execPrinting(ctx, t, c, ns, pod.Name, "/agnhost", "mounttest", "--file_content=/proc/self/mountinfo")
	if err != nil || !mountedAt(out, "/data") {
		t.Errorf("no mount at /data in the container (%v):\n%s", err, out)
	}

	if err := kube.Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.PersistentVolumeClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "volume "+pv.Name+" and its directory deleted", func() error {
		if _, err := kube.PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("volume %s still there (get: %v)", pv.Name, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("directory %s still there (stat: %v)", dir, err)
		}
		return nil
	})
}

// mountedAt says whether a /proc/<pid>/mountinfo text has a mount point at
// path (the fifth field).
func mountedAt(mountinfo, path string) bool {
	for line := range strings.SplitSeq(mountinfo, "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// execPrinting runs a command that always prints (agnhost mounttest
// --file_content) and tries again, up to 3 times, when the exec ends
// without error and without any output: seen once in a full make test run
// here and in 5 of 10 first execs of the demo, through the API server's
// WebSocket-to-SPDY translation, the kubelet and containerd 1.6, with no
// ferry component in the path (cause not attributed). A command that fails
// or prints something is not retried.
func execPrinting(ctx context.Context, t *testing.T, c *testbed.Cluster, ns, pod string, command ...string) (string, error) {
	t.Helper()
	for try := 1; ; try++ {
		out, err := c.Exec(ctx, ns, pod, command...)
		if err != nil || out != "" || try == 3 {
			return out, err
		}
		t.Logf("exec %v in %s/%s ended without error and without output (try %d); trying again", command, ns, pod, try)
	}
}
