// Package localwebhook runs ferry-webhook for a test-bed cluster on
// 127.0.0.1: manifests/webhook's configurations are installed with URLs
// instead of the in-cluster Service, and the webhook injects its own CA
// bundle into them as in production. With PlacementPolicy, the pod
// webhook's work is left to the admission policies of
// manifests/webhook-policy instead. The e2e suites, the benchmarks and the
// demo share it.
package localwebhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
	"github.com/ferry-io/ferry/webhooks"
)

// ManifestPath is the webhook configurations' file under the repository.
const ManifestPath = "manifests/webhook/webhooks.yaml"

// PolicyManifestPath is the file of the admission policies that place and
// validate pods in the API server, under the repository.
const PolicyManifestPath = "manifests/webhook-policy/pod-placement.yaml"

// Placement is what places the pods of offloaded namespaces on creation.
type Placement string

const (
	// PlacementWebhook: ferry-webhook's pod webhook (manifests/webhook).
	PlacementWebhook Placement = "webhook"
	// PlacementPolicy: admission policies in the API server, ferry-webhook
	// keeping every other webhook (manifests/webhook-policy).
	PlacementPolicy Placement = "policy"
)

// DefaultPlacement is the placement of manifests/webhook, the one ferry
// installs unless told otherwise.
const DefaultPlacement = PlacementWebhook

// ParsePlacement parses a -placement flag.
func ParsePlacement(s string) (Placement, error) {
	switch p := Placement(s); p {
	case PlacementWebhook, PlacementPolicy:
		return p, nil
	}
	return "", fmt.Errorf("placement %q: want %s or %s", s, PlacementWebhook, PlacementPolicy)
}

// podMutatingWebhook is the webhook PlacementPolicy leaves out: the
// policies do its work.
const podMutatingWebhook = "pods.mutate.ferry.io"

// Admission is what configures admission for ferry on a cluster: the
// webhook configurations and, with PlacementPolicy, the policies and their
// bindings.
type Admission struct {
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	// Policies are MutatingAdmissionPolicies, ValidatingAdmissionPolicies
	// and their bindings.
	Policies []client.Object
}

// Load reads the admission objects of placement from repoRoot, every
// webhook pointing at baseURL (https://127.0.0.1:port) plus its Service
// path.
func Load(repoRoot, baseURL string, placement Placement) (*Admission, error) {
	mutating, validating, err := Configurations(repoRoot, baseURL)
	if err != nil {
		return nil, err
	}
	a := &Admission{Mutating: mutating, Validating: validating}
	if placement == PlacementWebhook {
		return a, nil
	}
	if a.Policies, err = Policies(repoRoot); err != nil {
		return nil, err
	}
	a.Mutating.Webhooks = slices.DeleteFunc(a.Mutating.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
		return w.Name == podMutatingWebhook
	})
	return a, nil
}

// Configurations reads the webhook configurations from repoRoot and points
// every webhook at baseURL (https://127.0.0.1:port) plus its Service path.
func Configurations(repoRoot, baseURL string) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	f, err := os.Open(filepath.Join(repoRoot, ManifestPath))
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var mutating admissionregistrationv1.MutatingWebhookConfiguration
	var validating admissionregistrationv1.ValidatingWebhookConfiguration
	if err := dec.Decode(&mutating); err != nil {
		return nil, nil, fmt.Errorf("%s: mutating configuration: %w", ManifestPath, err)
	}
	if err := dec.Decode(&validating); err != nil {
		return nil, nil, fmt.Errorf("%s: validating configuration: %w", ManifestPath, err)
	}
	if mutating.Kind != "MutatingWebhookConfiguration" || validating.Kind != "ValidatingWebhookConfiguration" {
		return nil, nil, fmt.Errorf("%s: want a MutatingWebhookConfiguration then a ValidatingWebhookConfiguration, got %s, %s", ManifestPath, mutating.Kind, validating.Kind)
	}
	for i := range mutating.Webhooks {
		toURL(&mutating.Webhooks[i].ClientConfig, baseURL)
	}
	for i := range validating.Webhooks {
		toURL(&validating.Webhooks[i].ClientConfig, baseURL)
	}
	return &mutating, &validating, nil
}

// Policies reads the admission policies and bindings of PolicyManifestPath
// under repoRoot.
func Policies(repoRoot string) ([]client.Object, error) {
	f, err := os.Open(filepath.Join(repoRoot, PolicyManifestPath))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []client.Object
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", PolicyManifestPath, err)
		}
		if len(raw.Raw) == 0 {
			continue
		}
		var typ metav1.TypeMeta
		if err := json.Unmarshal(raw.Raw, &typ); err != nil {
			return nil, fmt.Errorf("%s: %w", PolicyManifestPath, err)
		}
		var obj client.Object
		switch typ.Kind {
		case "MutatingAdmissionPolicy":
			obj = &admissionregistrationv1.MutatingAdmissionPolicy{}
		case "MutatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			return nil, fmt.Errorf("%s: unexpected kind %q", PolicyManifestPath, typ.Kind)
		}
		if err := json.Unmarshal(raw.Raw, obj); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", PolicyManifestPath, typ.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func toURL(cc *admissionregistrationv1.WebhookClientConfig, baseURL string) {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := baseURL + path
	cc.URL, cc.Service = &u, nil
}

// Install creates the webhook configurations (PlacementWebhook), replacing
// earlier ones.
func Install(ctx context.Context, c client.Client, repoRoot, baseURL string) error {
	a, err := Load(repoRoot, baseURL, PlacementWebhook)
	if err != nil {
		return err
	}
	return a.Install(ctx, c)
}

// Install creates a's objects, replacing earlier ones and deleting the
// policies of an earlier install that a does not have.
func (a *Admission) Install(ctx context.Context, c client.Client) error {
	if err := uninstallPolicies(ctx, c); err != nil {
		return err
	}
	for _, obj := range append([]client.Object{a.Mutating, a.Validating}, a.Policies...) {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old %s: %w", obj.GetName(), err)
		}
		obj.SetResourceVersion("")
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// Uninstall deletes the configurations and policies, so a stopped webhook
// does not make the API server refuse pods.
func Uninstall(ctx context.Context, c client.Client) error {
	var errs []error
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		obj.SetName(webhooks.ConfigurationName)
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, uninstallPolicies(ctx, c))...)
}

// uninstallPolicies deletes every admission policy and binding whose name
// ends in .ferry.io.
func uninstallPolicies(ctx context.Context, c client.Client) error {
	var errs []error
	for _, list := range []client.ObjectList{
		&admissionregistrationv1.MutatingAdmissionPolicyBindingList{}, &admissionregistrationv1.MutatingAdmissionPolicyList{},
		&admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}, &admissionregistrationv1.ValidatingAdmissionPolicyList{},
	} {
		if err := c.List(ctx, list); err != nil {
			errs = append(errs, fmt.Errorf("list %T: %w", list, err))
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, item := range items {
			obj := item.(client.Object)
			if !strings.HasSuffix(obj.GetName(), ".ferry.io") {
				continue
			}
			if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Ports are two free TCP ports on 127.0.0.1: the webhook's and its health
// probe's.
func Ports() (webhook, health int, err error) {
	ports, err := testbed.FreePorts(2)
	if err != nil {
		return 0, 0, err
	}
	return ports[0], ports[1], nil
}

// Options are the ferry-webhook options for a local run on port and
// healthPort: self-signed, 127.0.0.1 in the certificate.
func Options(port, healthPort int) webhooks.Options {
	return webhooks.Options{
		Host: "127.0.0.1", Port: port, SelfSignedCerts: true,
		CertSecret:   client.ObjectKey{Namespace: ferryv1alpha1.SystemNamespace, Name: "ferry-webhook-certs"},
		CertDNSNames: []string{"localhost"}, CertIPs: []string{"127.0.0.1"},
		MetricsAddr: "0", HealthAddr: "127.0.0.1:" + strconv.Itoa(healthPort),
	}
}

// WaitReady polls the webhook's /readyz (caches synced, CA injected).
func WaitReady(ctx context.Context, healthPort int, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = string(body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("ferry-webhook not ready after %s (last: %s): %w", timeout, last, err)
	}
	return nil
}

// Run starts ferry-webhook in-process for cfg, installs its configurations
// (PlacementWebhook) and waits until it is ready. stop ends it and
// uninstalls them.
func Run(ctx context.Context, cfg *rest.Config, c client.Client, repoRoot string) (stop func(), err error) {
	return RunAdmission(ctx, cfg, c, func(baseURL string) (*Admission, error) {
		return Load(repoRoot, baseURL, PlacementWebhook)
	})
}

// RunAdmission is Run with the admission objects admission builds for the
// webhook's baseURL.
func RunAdmission(ctx context.Context, cfg *rest.Config, c client.Client, admission func(baseURL string) (*Admission, error)) (stop func(), err error) {
	port, health, err := Ports()
	if err != nil {
		return nil, err
	}
	a, err := admission(fmt.Sprintf("https://127.0.0.1:%d", port))
	if err != nil {
		return nil, err
	}
	if err := a.Install(ctx, c); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	mgr, err := webhooks.NewManager(runCtx, rest.CopyConfig(cfg), Options(port, health))
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	stop = func() {
		cancel()
		<-done
		_ = Uninstall(context.WithoutCancel(ctx), c)
	}
	if err := WaitReady(ctx, health, time.Minute); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// WaitPlaced waits until a pod created in namespace (offloaded, its
// NamespaceOffloading in place) comes back placed, which it tries with
// dry-run creations: the API server starts applying new admission policies,
// and their parameters, a moment after they are created.
func WaitPlaced(ctx context.Context, c client.Client, namespace string, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "placement-probe-"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.example/probe:v1"}}},
		}
		if last = c.Create(ctx, pod, client.DryRunAll); last != nil {
			return false, nil
		}
		_, placed := pod.Annotations[webhooks.AnnotationAppliedPolicy]
		if !placed {
			last = fmt.Errorf("pod not placed yet")
		}
		return placed, nil
	})
	if err != nil {
		return fmt.Errorf("pods of namespace %s not placed after %s (last: %v): %w", namespace, timeout, last, err)
	}
	return nil
}
