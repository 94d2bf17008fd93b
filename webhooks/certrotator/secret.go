package certrotator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// maxSecretAttempts bounds how often one pass re-reads the Secret after
// losing a write race. Losing more than once in a row means several
// replicas disagree (for example on DNSNames during a rollout); the next
// pass tries again.
const maxSecretAttempts = 5

// ensureSecret makes the Secret hold valid material and returns it.
//
// It always reads the Secret from the API server rather than a cache so
// that a decision to rotate is based on the latest state. Writes are
// conditional: Create fails if another replica created the Secret first,
// and Update carries the resourceVersion that was read, so it fails if
// another replica wrote in between. In both cases the Secret is read again,
// and the other replica's material is adopted if it is valid; this is what
// makes concurrently starting or rotating replicas converge on one
// certificate.
func (r *Rotator) ensureSecret(ctx context.Context) (*material, error) {
	logger := log.FromContext(ctx)
	secrets := r.Client.CoreV1().Secrets(r.SecretNamespace)
	for range maxSecretAttempts {
		now := r.cfg.now()
		secret, err := secrets.Get(ctx, r.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			p, err := planSecret(nil, r.cfg.policy, now)
			if err != nil {
				return nil, err
			}
			secret = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: r.SecretNamespace, Name: r.SecretName},
				Type:       corev1.SecretTypeTLS,
				Data:       p.data,
			}
			_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				logger.V(1).Info("Secret was created concurrently; re-reading it")
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("certrotator: create secret %s/%s: %w", r.SecretNamespace, r.SecretName, err)
			}
			logger.Info("Created certificate secret", "caNotAfter", p.mat.ca.NotAfter, "certNotAfter", p.mat.serving.Leaf.NotAfter)
			return p.mat, nil
		}
		if err != nil {
			return nil, fmt.Errorf("certrotator: get secret %s/%s: %w", r.SecretNamespace, r.SecretName, err)
		}

		p, err := planSecret(secret.Data, r.cfg.policy, now)
		if err != nil {
			return nil, err
		}
		if !p.changed {
			return p.mat, nil
		}
		// The copy keeps the resourceVersion that was read: the update is
		// rejected with a conflict if the Secret changed since. The type is
		// left alone because it is immutable.
		updated := secret.DeepCopy()
		updated.Data = p.data
		_, err = secrets.Update(ctx, updated, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			logger.V(1).Info("Secret changed concurrently; re-reading it", "error", err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("certrotator: update secret %s/%s: %w", r.SecretNamespace, r.SecretName, err)
		}
		logger.Info("Rotated certificate secret", "reasons", p.reasons,
			"caNotAfter", p.mat.ca.NotAfter, "certNotAfter", p.mat.serving.Leaf.NotAfter,
			"bundleSize", len(p.mat.bundle))
		return p.mat, nil
	}
	return nil, fmt.Errorf("certrotator: secret %s/%s kept changing concurrently; gave up after %d attempts",
		r.SecretNamespace, r.SecretName, maxSecretAttempts)
}
