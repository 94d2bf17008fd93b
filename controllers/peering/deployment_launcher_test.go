package peering

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

func startCluster(t *testing.T) *testbed.Cluster {
	t.Helper()
	testbed.RequireBinaries(t)
	c, err := testbed.Start(t.Context(), testbed.Options{Name: "peering"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if out, err := c.Kubectl(t.Context(), "apply", "--server-side", "-k", filepath.Join("..", "..", "manifests", "base")); err != nil {
		t.Fatalf("install manifests: %v\n%s", err, out)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.List(ctx, &ferryv1alpha1.VirtualNodeList{}) == nil, nil
	})
	if err != nil {
		t.Fatalf("ferry's CRDs are not served: %v", err)
	}
	return c
}

func TestDeploymentLauncherRunsOneVirtualKubeletPerVirtualNode(t *testing.T) {
	c := startCluster(t)
	ctx := t.Context()
	vn := &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Name: "ferry-provider", Namespace: ferryv1alpha1.SystemNamespace},
		Spec:       ferryv1alpha1.VirtualNodeSpec{ClusterID: "provider", KubeconfigSecretRef: corev1.LocalObjectReference{Name: "ferry-peer-provider"}},
	}
	if err := c.Client.Create(ctx, vn); err != nil {
		t.Fatal(err)
	}
	l := &DeploymentLauncher{Client: c.Client, Image: "example.com/ferry-virtual-kubelet:test", ExtraArgs: []string{"--health-check-period=5s"}}
	key := client.ObjectKeyFromObject(vn)
	for range 2 { // idempotent
		if err := l.Ensure(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	var d appsv1.Deployment
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: vn.Namespace, Name: "ferry-vk-ferry-provider"}, &d); err != nil {
		t.Fatal(err)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if ctr.Image != l.Image || d.Spec.Template.Spec.ServiceAccountName != VirtualKubeletIdentity(vn.Name) || *d.Spec.Replicas != 1 {
		t.Errorf("deployment runs %s as %s x%d", ctr.Image, d.Spec.Template.Spec.ServiceAccountName, *d.Spec.Replicas)
	}
	wantArgs := []string{"--virtual-node-namespace=ferry-system", "--virtual-node-name=ferry-provider", "--node-ip=$(POD_IP)", "--health-check-period=5s"}
	if len(ctr.Env) != 1 || ctr.Env[0].Name != "POD_IP" || ctr.Env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %v: the kubelet API needs the pod's IP as POD_IP", ctr.Env)
	}
	if len(ctr.Args) != len(wantArgs) {
		t.Fatalf("args %v, want %v", ctr.Args, wantArgs)
	}
	for i := range wantArgs {
		if ctr.Args[i] != wantArgs[i] {
			t.Errorf("arg %d = %q, want %q", i, ctr.Args[i], wantArgs[i])
		}
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s: two virtual kubelets could serve one node during a rollout", d.Spec.Strategy.Type)
	}
	if len(d.OwnerReferences) != 1 || d.OwnerReferences[0].UID != vn.UID {
		t.Errorf("owner references %v, want the VirtualNode", d.OwnerReferences)
	}
	if err := l.Remove(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(&d), &d); !apierrors.IsNotFound(err) {
		t.Fatalf("after Remove the Deployment is still there: %v", err)
	}
	if err := l.Remove(ctx, key); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}

// A credential renewal restarts the virtual kubelet; in deployment mode its
// old pod must be gone before the new one exists, or two virtual kubelets
// would serve one node. A watch sees every pod of the Deployment come and go.
func TestDeploymentLauncherRestartNeverRunsTwoVirtualKubelets(t *testing.T) {
	testbed.RequireBinaries(t)
	ctx := t.Context()
	c, err := testbed.Start(ctx, testbed.Options{Name: "vk-restart", ControllerManager: true, Scheduler: true, Kwok: true,
		Nodes: []testbed.NodePool{{Name: "node", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	if out, err := c.Kubectl(ctx, "apply", "--server-side", "-k", filepath.Join("..", "..", "manifests", "base")); err != nil {
		t.Fatalf("install manifests: %v\n%s", err, out)
	}
	vn := &ferryv1alpha1.VirtualNode{
		ObjectMeta: metav1.ObjectMeta{Name: "ferry-provider", Namespace: ferryv1alpha1.SystemNamespace},
		Spec:       ferryv1alpha1.VirtualNodeSpec{ClusterID: "provider", KubeconfigSecretRef: corev1.LocalObjectReference{Name: "ferry-peer-provider"}},
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return c.Client.Create(ctx, vn) == nil, nil
	})
	if err != nil {
		t.Fatal("create VirtualNode:", err)
	}
	key := client.ObjectKeyFromObject(vn)
	if err := ensureVirtualKubeletIdentity(ctx, c.Client, key); err != nil {
		t.Fatal(err)
	}

	w, err := c.Kube.CoreV1().Pods(vn.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + vn.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type state struct{ most, seen, running int }
	states := make(chan state, 1000)
	go func() {
		pods, running := map[types.UID]bool{}, map[types.UID]bool{}
		seen := map[types.UID]bool{}
		most := 0
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(pods, p.UID)
				delete(running, p.UID)
			} else {
				pods[p.UID], seen[p.UID] = true, true
				running[p.UID] = p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
				if !running[p.UID] {
					delete(running, p.UID)
				}
			}
			most = max(most, len(pods))
			states <- state{most: most, seen: len(seen), running: len(running)}
		}
	}()
	waitFor := func(what string, ok func(state) bool) state {
		t.Helper()
		timeout := time.After(90 * time.Second)
		for {
			select {
			case s := <-states:
				if ok(s) {
					return s
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}

	l := &DeploymentLauncher{Client: c.Client, Image: "example.com/ferry-virtual-kubelet:test"}
	if err := l.Ensure(ctx, key); err != nil {
		t.Fatal(err)
	}
	waitFor("the first virtual kubelet pod to run", func(s state) bool { return s.running == 1 })
	if err := l.Restart(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := l.Ensure(ctx, key); err != nil { // the peering controller's next step
		t.Fatal(err)
	}
	s := waitFor("a second virtual kubelet pod to run", func(s state) bool { return s.seen >= 2 && s.running == 1 })
	if s.most > 1 {
		t.Errorf("%d virtual kubelet pods existed at once during the restart", s.most)
	}
}
