package certrotator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	kindMutating   = "MutatingWebhookConfiguration"
	kindValidating = "ValidatingWebhookConfiguration"
)

// configRef names one webhook configuration.
type configRef struct {
	kind, name string
}

// webhookCA is the part of a webhook the injection looks at.
type webhookCA struct {
	name     string
	caBundle []byte
}

// jsonPatchOp is one RFC 6902 operation.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// injectAll puts bundle into every webhook of every named configuration. It
// returns how many configurations do not exist yet; those are not an error
// because the configurations are often applied after the webhook server
// starts. Errors for individual configurations are joined, so one failing
// configuration does not keep the others from being injected.
func (r *Rotator) injectAll(ctx context.Context, bundle []byte) (missing int, err error) {
	logger := log.FromContext(ctx)
	var errs []error
	for _, ref := range r.cfg.configs {
		found, err := r.inject(ctx, ref, bundle)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !found:
			missing++
			if !r.missing[ref] {
				logger.Info("Webhook configuration not found; will inject the CA bundle once it exists", "kind", ref.kind, "name", ref.name)
				r.missing[ref] = true
			}
		default:
			delete(r.missing, ref)
			r.injected[ref] = true
		}
	}
	return missing, errors.Join(errs...)
}

// inject makes every webhook of one configuration carry bundle. It patches
// only when some webhook differs, so steady-state passes are read-only.
//
// The JSON patch addresses webhooks by index and guards every index with a
// test of the webhook's name: if the list was reordered concurrently the
// patch fails and is retried, instead of writing into the wrong webhook. A
// patch, unlike an update, cannot drop fields this client does not know.
func (r *Rotator) inject(ctx context.Context, ref configRef, bundle []byte) (found bool, err error) {
	webhooks, err := r.getWebhooks(ctx, ref)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certrotator: get %s %s: %w", ref.kind, ref.name, err)
	}
	patch, stale := caBundlePatch(webhooks, bundle)
	if stale == 0 {
		return true, nil
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return false, fmt.Errorf("certrotator: encode patch for %s %s: %w", ref.kind, ref.name, err)
	}
	err = r.patchWebhooks(ctx, ref, data)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("certrotator: patch caBundle of %s %s: %w", ref.kind, ref.name, err)
	}
	log.FromContext(ctx).Info("Injected CA bundle", "kind", ref.kind, "name", ref.name, "webhooks", stale)
	return true, nil
}

// caBundlePatch builds a JSON patch that sets caBundle on every webhook
// whose caBundle differs from bundle, and returns how many those are.
func caBundlePatch(webhooks []webhookCA, bundle []byte) ([]jsonPatchOp, int) {
	var ops []jsonPatchOp
	stale := 0
	for i, wh := range webhooks {
		if bytes.Equal(wh.caBundle, bundle) {
			continue
		}
		stale++
		ops = append(ops,
			jsonPatchOp{Op: "test", Path: fmt.Sprintf("/webhooks/%d/name", i), Value: wh.name},
			// "add" replaces an existing member and creates a missing one.
			// A []byte value marshals to base64, the API's encoding.
			jsonPatchOp{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: bundle},
		)
	}
	return ops, stale
}

func (r *Rotator) getWebhooks(ctx context.Context, ref configRef) ([]webhookCA, error) {
	api := r.Client.AdmissionregistrationV1()
	var out []webhookCA
	switch ref.kind {
	case kindMutating:
		cfg, err := api.MutatingWebhookConfigurations().Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, wh := range cfg.Webhooks {
			out = append(out, webhookCA{name: wh.Name, caBundle: wh.ClientConfig.CABundle})
		}
	case kindValidating:
		cfg, err := api.ValidatingWebhookConfigurations().Get(ctx, ref.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, wh := range cfg.Webhooks {
			out = append(out, webhookCA{name: wh.Name, caBundle: wh.ClientConfig.CABundle})
		}
	default:
		return nil, fmt.Errorf("unknown webhook configuration kind %q", ref.kind)
	}
	return out, nil
}

func (r *Rotator) patchWebhooks(ctx context.Context, ref configRef, patch []byte) error {
	api := r.Client.AdmissionregistrationV1()
	var err error
	switch ref.kind {
	case kindMutating:
		_, err = api.MutatingWebhookConfigurations().Patch(ctx, ref.name, types.JSONPatchType, patch, metav1.PatchOptions{})
	case kindValidating:
		_, err = api.ValidatingWebhookConfigurations().Patch(ctx, ref.name, types.JSONPatchType, patch, metav1.PatchOptions{})
	default:
		err = fmt.Errorf("unknown webhook configuration kind %q", ref.kind)
	}
	return err
}
