package peering

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// tokenClaims are the parts of a service-account token the consumer reads
// to renew it. The token is not verified here: the provider does that.
type tokenClaims struct {
	IssuedAt   int64 `json:"iat"`
	Expiry     int64 `json:"exp"`
	Kubernetes struct {
		Namespace      string `json:"namespace"`
		ServiceAccount struct {
			Name string `json:"name"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
}

func parseToken(token string) (*tokenClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT (%d parts)", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("decode token payload: %w", err)
	}
	var c tokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("parse token payload: %w", err)
	}
	if c.Expiry == 0 || c.IssuedAt == 0 || c.Expiry <= c.IssuedAt {
		return nil, fmt.Errorf("token has no usable iat/exp")
	}
	if c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
		return nil, fmt.Errorf("token names no service account")
	}
	return &c, nil
}

// renewalDue says whether a token has used two thirds of its lifetime, when
// the consumer renews it: early enough to survive a long provider outage.
func (c *tokenClaims) renewalDue(now time.Time) bool {
	lifetime := c.Expiry - c.IssuedAt
	return now.Unix() >= c.IssuedAt+lifetime*2/3
}

// renewCredential replaces the token in the credentials Secret with a fresh
// one for the same service account and lifetime, asked of the provider with
// the current token (the consumer's Role allows exactly that). Tokens
// without an expiry, or not due, are left alone. The virtual kubelet gets
// the new token when launchVirtualKubelet sees the Secret changed.
func (r *PeerReconciler) renewCredential(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, prov *Provider) error {
	claims, err := parseToken(prov.Config.BearerToken)
	if err != nil {
		// Not a renewable token (a client certificate, a static token):
		// whoever issued it renews it.
		return nil
	}
	if !claims.renewalDue(r.now()) {
		return nil
	}
	tr, err := prov.Kube.CoreV1().ServiceAccounts(claims.Kubernetes.Namespace).CreateToken(ctx, claims.Kubernetes.ServiceAccount.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(claims.Expiry - claims.IssuedAt)}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("renew the token of %s/%s: %w", claims.Kubernetes.Namespace, claims.Kubernetes.ServiceAccount.Name, err)
	}
	ref := fc.Spec.CredentialsSecretRef
	var secret corev1.Secret
	if err := r.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		return fmt.Errorf("read credentials Secret: %w", err)
	}
	cfg, err := clientcmd.Load(secret.Data[ferryv1alpha1.KubeconfigSecretKey])
	if err != nil {
		return fmt.Errorf("parse credentials Secret: %w", err)
	}
	ctxName := cfg.CurrentContext
	if c, ok := cfg.Contexts[ctxName]; ok {
		if a, ok := cfg.AuthInfos[c.AuthInfo]; ok {
			a.Token = tr.Status.Token
		}
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encode renewed kubeconfig: %w", err)
	}
	secret.Data[ferryv1alpha1.KubeconfigSecretKey] = data
	if err := r.Update(ctx, &secret); err != nil {
		return fmt.Errorf("store renewed credential: %w", err)
	}
	log.FromContext(ctx).Info("Renewed credential", "provider", fc.Spec.ClusterID, "expires", tr.Status.ExpirationTimestamp.Time)
	return nil
}

func (r *PeerReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
