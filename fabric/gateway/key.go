package gateway

import (
	"context"
	"fmt"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The key Secret's keys and annotations.
const (
	// KeyPrivate holds the private key in force (base64, as wg(8) prints it).
	KeyPrivate = "privateKey"
	// KeyNext holds the key switched to at AnnotationRotateAt.
	KeyNext = "nextPrivateKey"
	// AnnotationRotateAt is when KeyNext replaces KeyPrivate (RFC 3339).
	AnnotationRotateAt = "ferry.io/rotate-at"
	// AnnotationCreatedAt is when KeyPrivate came in force (RFC 3339).
	AnnotationCreatedAt = "ferry.io/key-created-at"
	// AnnotationRotateKey, set to any value by an operator, asks for a new
	// key now (it is removed once the rotation is scheduled).
	AnnotationRotateKey = "ferry.io/rotate-key"
)

// Keys are the gateway's WireGuard keys.
type Keys struct {
	// Current is the private key in force.
	Current wgtypes.Key
	// Next, when set, replaces Current at RotateAt.
	Next     *wgtypes.Key
	RotateAt time.Time
}

// keyStore keeps the gateway's keys in a Secret: they survive restarts,
// so peers keep the public key they know.
type keyStore struct {
	client.Client
	key client.ObjectKey
	// every is the automatic rotation period (0: only on request); grace
	// the time between publishing the next key and switching to it, longer
	// than peers take to learn it.
	every, grace time.Duration
	now          func() time.Time
}

// load reads the keys, making the Secret on first start, scheduling a
// rotation when due or asked for, and carrying out one whose time came.
func (s *keyStore) load(ctx context.Context) (Keys, error) {
	var sec corev1.Secret
	err := s.Get(ctx, s.key, &sec)
	now := s.now()
	if apierrors.IsNotFound(err) {
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return Keys{}, fmt.Errorf("generate WireGuard key: %w", err)
		}
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.key.Namespace, Name: s.key.Name,
				Labels:      map[string]string{"app.kubernetes.io/component": "ferry-gateway"},
				Annotations: map[string]string{AnnotationCreatedAt: now.UTC().Format(time.RFC3339)}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{KeyPrivate: []byte(k.String())},
		}
		if err := s.Create(ctx, &sec); err != nil {
			return Keys{}, fmt.Errorf("create key Secret %s: %w", s.key, err)
		}
		log.FromContext(ctx).Info("Generated the gateway's WireGuard key", "secret", s.key, "publicKey", k.PublicKey().String())
		return Keys{Current: k}, nil
	}
	if err != nil {
		return Keys{}, fmt.Errorf("read key Secret %s: %w", s.key, err)
	}
	keys, err := parseKeys(&sec)
	if err != nil {
		return Keys{}, err
	}
	changed := false
	switch {
	case keys.Next != nil && !now.Before(keys.RotateAt):
		// Peers switch at the same moment, by the time published.
		sec.Data[KeyPrivate] = []byte(keys.Next.String())
		delete(sec.Data, KeyNext)
		delete(sec.Annotations, AnnotationRotateAt)
		sec.Annotations[AnnotationCreatedAt] = now.UTC().Format(time.RFC3339)
		keys = Keys{Current: *keys.Next}
		changed = true
	case keys.Next == nil && s.due(&sec, now):
		next, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return Keys{}, fmt.Errorf("generate WireGuard key: %w", err)
		}
		keys.Next, keys.RotateAt = &next, now.Add(s.grace).Truncate(time.Second)
		sec.Data[KeyNext] = []byte(next.String())
		sec.Annotations[AnnotationRotateAt] = keys.RotateAt.UTC().Format(time.RFC3339)
		delete(sec.Annotations, AnnotationRotateKey)
		changed = true
	}
	if changed {
		if err := s.Update(ctx, &sec); err != nil {
			return Keys{}, fmt.Errorf("update key Secret %s: %w", s.key, err)
		}
		log.FromContext(ctx).Info("Key rotation", "publicKey", keys.Current.PublicKey().String(), "rotateAt", keys.RotateAt)
	}
	return keys, nil
}

// due says whether a rotation is asked for or the key is older than the
// rotation period.
func (s *keyStore) due(sec *corev1.Secret, now time.Time) bool {
	if _, ok := sec.Annotations[AnnotationRotateKey]; ok {
		return true
	}
	if s.every <= 0 {
		return false
	}
	created, err := time.Parse(time.RFC3339, sec.Annotations[AnnotationCreatedAt])
	return err != nil || now.Sub(created) >= s.every
}

func parseKeys(sec *corev1.Secret) (Keys, error) {
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	cur, err := wgtypes.ParseKey(string(sec.Data[KeyPrivate]))
	if err != nil {
		return Keys{}, fmt.Errorf("key Secret %s/%s: data.%s: %w", sec.Namespace, sec.Name, KeyPrivate, err)
	}
	keys := Keys{Current: cur}
	if raw, ok := sec.Data[KeyNext]; ok {
		next, err := wgtypes.ParseKey(string(raw))
		if err != nil {
			return Keys{}, fmt.Errorf("key Secret %s/%s: data.%s: %w", sec.Namespace, sec.Name, KeyNext, err)
		}
		at, err := time.Parse(time.RFC3339, sec.Annotations[AnnotationRotateAt])
		if err != nil {
			return Keys{}, fmt.Errorf("key Secret %s/%s: annotation %s: %w", sec.Namespace, sec.Name, AnnotationRotateAt, err)
		}
		keys.Next, keys.RotateAt = &next, at
	}
	return keys, nil
}
