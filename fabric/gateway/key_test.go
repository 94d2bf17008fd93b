package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestKeyStoreMakesKeepsAndRotatesTheKey(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme()).Build()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := &keyStore{Client: c, key: client.ObjectKey{Namespace: "ferry-system", Name: "ferry-gateway-key"}, grace: time.Minute, now: func() time.Time { return now }}

	first, err := s.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.load(ctx)
	if err != nil || again.Current != first.Current || again.Next != nil {
		t.Fatalf("a restart must keep the key: %v %v", again, err)
	}

	var sec corev1.Secret
	if err := c.Get(ctx, s.key, &sec); err != nil {
		t.Fatal(err)
	}
	sec.Annotations[AnnotationRotateKey] = "please"
	if err := c.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	scheduled, err := s.load(ctx)
	if err != nil || scheduled.Current != first.Current || scheduled.Next == nil || !scheduled.RotateAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("asked for: the next key is announced for a minute later, the current one stays: %+v %v", scheduled, err)
	}
	if err := c.Get(ctx, s.key, &sec); err != nil || sec.Annotations[AnnotationRotateKey] != "" {
		t.Fatalf("the request is consumed: %v %v", sec.Annotations, err)
	}

	now = now.Add(time.Minute)
	rotated, err := s.load(ctx)
	if err != nil || rotated.Current != *scheduled.Next || rotated.Next != nil {
		t.Fatalf("at the announced time the next key is in force: %+v %v", rotated, err)
	}

	s.every = time.Hour
	now = now.Add(time.Hour)
	due, err := s.load(ctx)
	if err != nil || due.Next == nil {
		t.Fatalf("an hour later, with --key-rotation=1h, a rotation is scheduled: %+v %v", due, err)
	}
}

func TestKeyStoreNamesABadSecret(t *testing.T) {
	sec := &corev1.Secret{Data: map[string][]byte{KeyPrivate: []byte("short")}}
	sec.Namespace, sec.Name = "ferry-system", "k"
	if _, err := parseKeys(sec); err == nil || !strings.Contains(err.Error(), "data.privateKey") {
		t.Errorf("err = %v, want one naming data.privateKey", err)
	}
}
