package node

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
)

// TestRunStopsWhenCancelled cancels a virtual kubelet at points all along
// its start (reading its node, watching the provider, syncing caches,
// reflecting an offloaded namespace) and once running, with each remote
// scope of the reflection: Run must return soon every time, or the
// process hangs on SIGTERM and the controller manager with it.
func TestRunStopsWhenCancelled(t *testing.T) {
	ctx := t.Context()
	consumer, provider := startConsumerAndProvider(t)
	applyBase(t, consumer)
	applyBase(t, provider)
	kubeconfig, err := os.ReadFile(provider.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	ns := ferryv1alpha1.SystemNamespace
	eventually(t, 30*time.Second, "ferry's objects created", func(ctx context.Context) error {
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider-kubeconfig"}, Data: map[string][]byte{ferryv1alpha1.KubeconfigSecretKey: kubeconfig}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ferryv1alpha1.ClusterIdentityConfigMap}, Data: map[string]string{ferryv1alpha1.ClusterIdentityKey: "consumer"}},
			&ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "provider"}, Spec: ferryv1alpha1.VirtualNodeSpec{
				ClusterID: "provider", NodeName: "ferry-provider", KubeconfigSecretRef: corev1.LocalObjectReference{Name: "provider-kubeconfig"},
			}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}},
		} {
			if err := consumer.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		if err := provider.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app-twin"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		nso := &ferryv1alpha1.NamespaceOffloading{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: ferryv1alpha1.NamespaceOffloadingName}}
		if err := consumer.Client.Create(ctx, nso); apierrors.IsAlreadyExists(err) {
			if err := consumer.Client.Get(ctx, client.ObjectKeyFromObject(nso), nso); err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		nso.Status.Clusters = []ferryv1alpha1.ClusterOffloadingStatus{{ClusterID: "provider", TwinNamespace: "app-twin", Phase: ferryv1alpha1.OffloadingReady}}
		return consumer.Client.Status().Update(ctx, nso)
	})
	if err := consumer.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "settings"}, Data: map[string]string{"a": "b"}}); err != nil {
		t.Fatal(err)
	}

	delays := []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		300 * time.Millisecond, 500 * time.Millisecond, 800 * time.Millisecond, 1200 * time.Millisecond, 2 * time.Second, 4 * time.Second}
	for _, scope := range []remotescope.Scope{remotescope.Namespace, remotescope.Cluster} {
		for _, delay := range delays {
			opts := Options{
				VirtualNodeNamespace: ns, VirtualNodeName: "provider", KubeletAddress: "127.0.0.1:0",
				HealthCheckPeriod: 500 * time.Millisecond, HealthCheckTimeout: 400 * time.Millisecond, FailureThreshold: 3,
				RemoteScope: scope,
			}
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0)))
			runCtx, cancel := context.WithCancel(klog.NewContext(ctx, logger))
			done := make(chan error, 1)
			go func() { done <- Run(runCtx, consumer.Config, opts) }()
			time.Sleep(delay)
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("Run (remote scope %s) cancelled %s after its start still runs 30 s later; goroutines:\n%s", scope, delay, allStacks())
			}
		}
	}
}

// allStacks is the stack of every goroutine of the test.
func allStacks() string {
	buf := make([]byte, 64<<20)
	return string(buf[:runtime.Stack(buf, true)])
}
