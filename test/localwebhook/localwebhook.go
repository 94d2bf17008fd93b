// Package localwebhook runs ferry-webhook for a test-bed cluster on
// 127.0.0.1: manifests/webhook's configurations are installed with URLs
// instead of the in-cluster Service, and the webhook injects its own CA
// bundle into them as in production. The e2e suites, the benchmarks and the
// demo share it.
package localwebhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

func toURL(cc *admissionregistrationv1.WebhookClientConfig, baseURL string) {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	u := baseURL + path
	cc.URL, cc.Service = &u, nil
}

// Install creates the configurations, replacing earlier ones.
func Install(ctx context.Context, c client.Client, repoRoot, baseURL string) error {
	mutating, validating, err := Configurations(repoRoot, baseURL)
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete old %s: %w", obj.GetName(), err)
		}
		obj.SetResourceVersion("")
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// Uninstall deletes the configurations, so a stopped webhook does not make
// the API server refuse pods.
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
// and waits until it is ready. stop ends it and uninstalls them.
func Run(ctx context.Context, cfg *rest.Config, c client.Client, repoRoot string) (stop func(), err error) {
	port, health, err := Ports()
	if err != nil {
		return nil, err
	}
	if err := Install(ctx, c, repoRoot, fmt.Sprintf("https://127.0.0.1:%d", port)); err != nil {
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
