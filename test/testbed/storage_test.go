package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/ferry-io/ferry/test/testbed/hostpath"
)

// annSelectedNode is how kube-scheduler (and ferry's storage fabric) tells a
// provisioner where a claim waiting for its first consumer must live.
const annSelectedNode = "volume.kubernetes.io/selected-node"

// startStorageCluster starts a cluster with Storage and stops it when the
// test ends, printing its logs when the test failed.
func startStorageCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	RequireBinaries(t)
	opts.Storage = true
	c, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(30))
		}
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func newClaim(name, class, size string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceDefault, Name: name, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if class != "" {
		pvc.Spec.StorageClassName = &class
	}
	return pvc
}

// waitUntil polls done until it reports true, failing the test with what
// was awaited and the last error after timeout.
func waitUntil(t *testing.T, what string, timeout time.Duration, done func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := done(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}

// boundVolume waits until the claim is bound and returns its volume.
func boundVolume(t *testing.T, c *Cluster, claim string) *corev1.PersistentVolume {
	t.Helper()
	var pv *corev1.PersistentVolume
	waitUntil(t, "claim "+claim+" bound", 60*time.Second, func(ctx context.Context) (bool, error) {
		pvc, err := c.Kube.CoreV1().PersistentVolumeClaims(corev1.NamespaceDefault).Get(ctx, claim, metav1.GetOptions{})
		if err != nil || pvc.Status.Phase != corev1.ClaimBound {
			return false, err
		}
		pv, err = c.Kube.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		return err == nil, err
	})
	return pv
}

// The whole dynamic-provisioning path runs for real: the scheduler picks the
// pod's node, the PV controller hands the claim to the provisioner, which
// makes a directory pinned to that node; deleting pod and claim deletes the
// volume and its directory.
func TestStorageProvisionsOnThePodsNodeAndDeletesWithTheClaim(t *testing.T) {
	c := startStorageCluster(t, Options{Name: "storage", Scheduler: true, Nodes: []NodePool{{Name: "n", Count: 2}}})
	kube := c.Kube.CoreV1()
	ns := corev1.NamespaceDefault

	pvc, err := kube.PersistentVolumeClaims(ns).Create(t.Context(), newClaim("data", "", "2Gi", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(pvc.Spec.StorageClassName, ""); got != StorageClassStandard {
		t.Fatalf("a claim without a class got class %q, want the default %q", got, StorageClassStandard)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name},
			}}},
		},
	}
	if _, err := kube.Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var node string
	waitUntil(t, "pod app Running", 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := kube.Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return p.Status.Phase == corev1.PodRunning, nil
	})
	pv := boundVolume(t, c, pvc.Name)
	if got := hostpath.PinnedNode(pv); got == "" || got != node {
		t.Errorf("volume %s is pinned to %q (affinity %+v), want the pod's node %q", pv.Name, got, pv.Spec.NodeAffinity, node)
	}
	if pv.Spec.StorageClassName != StorageClassStandard || pv.Annotations["pv.kubernetes.io/provisioned-by"] != StorageProvisioner {
		t.Errorf("volume %s: class %q, provisioned by %q; want %q by %q", pv.Name, pv.Spec.StorageClassName, pv.Annotations["pv.kubernetes.io/provisioned-by"], StorageClassStandard, StorageProvisioner)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("volume %s has capacity %s, want the claim's 2Gi", pv.Name, got.String())
	}
	dir := filepath.Join(c.Dir, VolumesDir, pv.Name)
	if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != dir {
		t.Fatalf("volume %s has source %+v, want hostPath %s", pv.Name, pv.Spec.PersistentVolumeSource, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("directory of volume %s: %v", pv.Name, err)
	}

	// Expansion, as a CSI external-resizer does it: the volume, then the
	// claim's capacity; no resize status or condition stays.
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}`)
	if _, err := kube.PersistentVolumeClaims(ns).Patch(t.Context(), pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "claim data grown to 3Gi", 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := kube.PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		capacity := got.Status.Capacity[corev1.ResourceStorage]
		if capacity.Cmp(resource.MustParse("3Gi")) != 0 || len(got.Status.Conditions) != 0 || got.Status.AllocatedResourceStatuses != nil {
			return false, fmt.Errorf("capacity %s, conditions %v, resize statuses %v", capacity.String(), got.Status.Conditions, got.Status.AllocatedResourceStatuses)
		}
		grown, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		size := grown.Spec.Capacity[corev1.ResourceStorage]
		return size.Cmp(resource.MustParse("3Gi")) == 0, fmt.Errorf("volume capacity %s", size.String())
	})

	if err := kube.Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.PersistentVolumeClaims(ns).Delete(t.Context(), pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "volume "+pv.Name+" deleted", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s survived its volume (stat: %v)", dir, err)
	}
}

// A node out of class fast hands the claim back: the selected node is
// removed so the scheduler picks again, and the claim's events say why. The
// claim is pinned by hand, as ferry's storage fabric does, so no scheduler
// puts the node back before the test looks.
func TestStorageHandsAClaimThatDoesNotFitBackToTheScheduler(t *testing.T) {
	c := startStorageCluster(t, Options{Name: "storage-full", Nodes: []NodePool{{Name: "n", Count: 1}}})
	kube := c.Kube.CoreV1()
	ns := corev1.NamespaceDefault
	pinned := map[string]string{annSelectedNode: "n-0"}

	// 6Gi of the node's 10Gi.
	if _, err := kube.PersistentVolumeClaims(ns).Create(t.Context(), newClaim("first", StorageClassFast, "6Gi", pinned), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := boundVolume(t, c, "first")
	if got := hostpath.PinnedNode(first); got != "n-0" {
		t.Fatalf("volume %s is pinned to %q, want n-0", first.Name, got)
	}

	// Another 6Gi does not fit.
	if _, err := kube.PersistentVolumeClaims(ns).Create(t.Context(), newClaim("second", StorageClassFast, "6Gi", pinned), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "claim second handed back (selected node removed)", 60*time.Second, func(ctx context.Context) (bool, error) {
		pvc, err := kube.PersistentVolumeClaims(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, selected := pvc.Annotations[annSelectedNode]
		return !selected, nil
	})
	var message string
	waitUntil(t, "event ProvisioningFailed on claim second", 30*time.Second, func(ctx context.Context) (bool, error) {
		events, err := kube.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=second,reason=ProvisioningFailed"})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		message = events.Items[0].Message
		return true, nil
	})
	for _, want := range []string{"n-0", FastCapacityPerNode} {
		if !strings.Contains(message, want) {
			t.Errorf("event ProvisioningFailed %q does not name %s", message, want)
		}
	}
	pvc, err := kube.PersistentVolumeClaims(ns).Get(t.Context(), "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Spec.VolumeName != "" {
		t.Fatalf("claim second got volume %s on a full node", pvc.Spec.VolumeName)
	}

	// Deleting the first claim frees the node: pinned again, the second fits.
	if err := kube.PersistentVolumeClaims(ns).Delete(t.Context(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "volume "+first.Name+" deleted", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.Kube.CoreV1().PersistentVolumes().Get(ctx, first.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	metav1.SetMetaDataAnnotation(&pvc.ObjectMeta, annSelectedNode, "n-0")
	if _, err := kube.PersistentVolumeClaims(ns).Update(t.Context(), pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if second := boundVolume(t, c, "second"); hostpath.PinnedNode(second) != "n-0" {
		t.Errorf("volume %s is pinned to %q, want n-0", second.Name, hostpath.PinnedNode(second))
	}

	// Stop ends the in-process provisioner too: no goroutine of it, its
	// informers or its event recorder is left.
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the provisioner's goroutines to end", 10*time.Second, func(context.Context) (bool, error) {
		if left := provisionerGoroutines(); len(left) > 0 {
			return false, fmt.Errorf("%d left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		return true, nil
	})
}

// provisionerGoroutines are the stacks of goroutines running the storage
// provisioner's code, its lib's, or an event recorder (only it records
// events in this test process).
func provisionerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "sig-storage-lib-external-provisioner") || strings.Contains(g, "testbed/hostpath") || strings.Contains(g, "client-go/tools/record") {
			out = append(out, g)
		}
	}
	return out
}

// Each cluster's provisioner has its own client, informers and event
// recorder: clusters started together provision into their own folders,
// and stopping one leaves the other's provisioner working.
func TestStorageOfTwoClustersStaysApart(t *testing.T) {
	RequireBinaries(t)
	opts := Options{Storage: true, Nodes: []NodePool{{Name: "n", Count: 1}}}
	east, west := opts, opts
	east.Name, west.Name = "storage-east", "storage-west"
	clusters, err := StartClusters(t.Context(), east, west)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(c.Logs(30))
			}
			if err := c.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	pinned := map[string]string{annSelectedNode: "n-0"}
	for _, c := range clusters {
		if _, err := c.Kube.CoreV1().PersistentVolumeClaims(corev1.NamespaceDefault).Create(t.Context(), newClaim("data", StorageClassStandard, "1Gi", pinned), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clusters {
		pv := boundVolume(t, c, "data")
		if want := filepath.Join(c.Dir, VolumesDir, pv.Name); pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != want {
			t.Errorf("cluster %s: volume %s has source %+v, want hostPath %s", c.Name, pv.Name, pv.Spec.PersistentVolumeSource, want)
		}
		waitUntil(t, "event ProvisioningSucceeded in cluster "+c.Name, 30*time.Second, func(ctx context.Context) (bool, error) {
			events, err := c.Kube.CoreV1().Events(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=data,reason=ProvisioningSucceeded"})
			return err == nil && len(events.Items) == 1, err
		})
	}

	if err := clusters[0].Stop(); err != nil {
		t.Fatal(err)
	}
	c := clusters[1]
	if _, err := c.Kube.CoreV1().PersistentVolumeClaims(corev1.NamespaceDefault).Create(t.Context(), newClaim("after", StorageClassStandard, "1Gi", pinned), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	boundVolume(t, c, "after")
}
