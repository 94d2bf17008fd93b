package install

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// webhookFixture is a namespace, a webhook Deployment and the webhook
// configuration it injects its CA bundle into.
func webhookFixture(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range []string{`
apiVersion: v1
kind: Namespace
metadata: {name: ferry-system}
`, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ferry-webhook, namespace: ferry-system}
spec:
  replicas: 1
  selector: {matchLabels: {app: webhook}}
  template:
    metadata: {labels: {app: webhook}}
    spec: {containers: [{name: webhook, image: example.invalid/webhook:1}]}
`, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: ferry-webhook}
webhooks:
  - name: pods.validate.ferry.io
    clientConfig: {service: {name: ferry-webhook, namespace: ferry-system, path: /validate}}
    rules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods]}]
    sideEffects: None
    admissionReviewVersions: [v1]
`} {
		u := &unstructured.Unstructured{}
		if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(d), 4096).Decode(&u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// webhookCluster is a fake cluster whose webhook Deployment becomes
// available only once its ValidatingWebhookConfiguration exists, as
// ferry-webhook with self-managed certificates does (its readiness waits
// for its CA bundle to be injected). Its pod says so while it waits.
// After failReadsAfter reads of the Deployment (0: never), every read of it
// fails as client-go's rate limiter does near a context's deadline.
func webhookCluster(t *testing.T, failReadsAfter int) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ferry-webhook-abc", Namespace: "ferry-system", Labels: map[string]string{"app": "webhook"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [webhook]"}}},
	}
	reads := 0
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			u, ok := obj.(*unstructured.Unstructured)
			if ok && u.GetKind() == "Deployment" {
				if reads++; failReadsAfter > 0 && reads > failReadsAfter {
					return errors.New("client rate limiter Wait returns error: rate: Wait(n=1) would exceed context deadline")
				}
			}
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if !ok || u.GetKind() != "Deployment" {
				return nil
			}
			var vwc unstructured.Unstructured
			vwc.SetAPIVersion("admissionregistration.k8s.io/v1")
			vwc.SetKind("ValidatingWebhookConfiguration")
			err := c.Get(ctx, client.ObjectKey{Name: "ferry-webhook"}, &vwc)
			if apierrors.IsNotFound(err) {
				st := appsv1.DeploymentStatus{ObservedGeneration: u.GetGeneration(), Replicas: 1, UpdatedReplicas: 1, UnavailableReplicas: 1,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}}}
				return setStatus(u, st)
			}
			if err != nil {
				return err
			}
			st := appsv1.DeploymentStatus{ObservedGeneration: u.GetGeneration(), Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
			return setStatus(u, st)
		},
	}).Build()
}

func setStatus(u *unstructured.Unstructured, st appsv1.DeploymentStatus) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	return unstructured.SetNestedMap(u.Object, m, "status")
}

// TestInstallWaitsForWorkloadsAfterTheWebhookConfigurations: a webhook that
// becomes ready only once its configuration exists (self-managed
// certificates) does not hold the install until its timeout.
func TestInstallWaitsForWorkloadsAfterTheWebhookConfigurations(t *testing.T) {
	var out bytes.Buffer
	in := &Installer{Client: webhookCluster(t, 0), Out: &out, Namespace: "ferry-system", Poll: 10 * time.Millisecond}
	_, err := in.Install(t.Context(), webhookFixture(t), Options{Version: "test", Wait: true, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "workloads") || !strings.Contains(out.String(), "ready in") {
		t.Errorf("no progress line saying the workloads are ready:\n%s", out.String())
	}
	t.Log(out.String())
}

// TestInstallTimeoutNamesWhatItWaitedFor: the timeout's error names the
// object, its condition and its pod's, not the client's rate limiter.
func TestInstallTimeoutNamesWhatItWaitedFor(t *testing.T) {
	objs := webhookFixture(t)
	c := webhookCluster(t, 3)
	for _, o := range objs[:2] {
		if err := c.Create(t.Context(), o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	in := &Installer{Client: c, Out: &bytes.Buffer{}, Namespace: "ferry-system", Poll: 10 * time.Millisecond}
	// Without the configuration the webhook never gets ready; the last
	// reads fail on the rate limiter.
	err := in.waitReady(t.Context(), objs[1:2], 200*time.Millisecond)
	if err == nil {
		t.Fatal("waitReady of a Deployment that never gets available = nil")
	}
	for _, want := range []string{"Deployment ferry-system/ferry-webhook", "Available=False MinimumReplicasUnavailable",
		"ferry-webhook-abc Running, Ready=False ContainersNotReady containers with unready status: [webhook]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeout error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "rate limiter") {
		t.Errorf("timeout error names the rate limiter: %v", err)
	}
	t.Log(err)
}
