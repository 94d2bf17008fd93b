package reflection

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func localSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: localObjectMeta("db"),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cret")},
		StringData: map[string]string{"ignored": "write-only"},
	}
}

func TestSecretTranslatorDesired(t *testing.T) {
	tests := []struct {
		name   string
		change func(*corev1.Secret)
		skip   bool
	}{
		{name: "opaque", change: func(*corev1.Secret) {}},
		{name: "TLS, immutable", change: func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeTLS
			s.Data = map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")}
			s.Immutable = new(true)
		}},
		{name: "dockerconfigjson", change: func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeDockerConfigJson
			s.Data = map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}
		}},
		{name: "service-account token", skip: true, change: func(s *corev1.Secret) {
			s.Type = corev1.SecretTypeServiceAccountToken
			s.Annotations[corev1.ServiceAccountNameKey] = "default"
		}},
		{name: "bootstrap token", skip: true, change: func(s *corev1.Secret) { s.Type = corev1.SecretTypeBootstrapToken }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			local := localSecret()
			tt.change(local)
			got, skip, err := secretTranslator{}.desired(translatorEnv(), local, "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			if tt.skip {
				if skip == "" || got != nil {
					t.Fatalf("desired = %v, %q; want skipped with a reason", got, skip)
				}
				return
			}
			if skip != "" {
				t.Fatalf("skipped: %s", skip)
			}
			want := got.(*corev1.Secret)
			checkReflectedMeta(t, want, "db", reflectedLabels(nil))
			if want.Type != local.Type {
				t.Errorf("type = %q, want %q", want.Type, local.Type)
			}
			if !maps.EqualFunc(want.Data, local.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("data = %q, want %q", want.Data, local.Data)
			}
			if want.StringData != nil {
				t.Errorf("stringData copied: %v", want.StringData)
			}
			if (want.Immutable == nil) != (local.Immutable == nil) {
				t.Errorf("immutable = %v, want %v", want.Immutable, local.Immutable)
			}
			for k := range want.Data {
				want.Data[k][0] = 0
				if local.Data[k][0] == 0 {
					t.Fatal("the copy shares its data with the local object")
				}
			}
		})
	}
}

func TestSecretTranslatorEqual(t *testing.T) {
	tests := []struct {
		name   string
		change func(*corev1.Secret)
		equal  bool
	}{
		{name: "as created", change: func(*corev1.Secret) {}, equal: true},
		{name: "immutable false", change: func(s *corev1.Secret) { s.Immutable = new(false) }, equal: true},
		{name: "data changed", change: func(s *corev1.Secret) { s.Data["password"] = []byte("leaked") }},
		{name: "data removed", change: func(s *corev1.Secret) { s.Data = nil }},
		{name: "type changed", change: func(s *corev1.Secret) { s.Type = corev1.SecretTypeBasicAuth }},
		{name: "label removed", change: func(s *corev1.Secret) { delete(s.Labels, "app") }},
		{name: "made immutable", change: func(s *corev1.Secret) { s.Immutable = new(true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _, err := secretTranslator{}.desired(translatorEnv(), localSecret(), "shop-home")
			if err != nil {
				t.Fatal(err)
			}
			remote := want.DeepCopyObject().(*corev1.Secret)
			assignIdentity(remote)
			tt.change(remote)
			if got := (secretTranslator{}).equal(want, remote); got != tt.equal {
				t.Errorf("equal = %v, want %v", got, tt.equal)
			}
		})
	}
}

func TestSecretTranslatorEqualDefaultsType(t *testing.T) {
	local := localSecret()
	local.Type = ""
	want, _, err := secretTranslator{}.desired(translatorEnv(), local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := want.DeepCopyObject().(*corev1.Secret)
	remote.Type = corev1.SecretTypeOpaque
	if !(secretTranslator{}).equal(want, remote) {
		t.Error("a type defaulted to Opaque is drift")
	}
}

func TestSecretTranslatorMerge(t *testing.T) {
	tr := secretTranslator{}
	local := localSecret()
	local.Type = corev1.SecretTypeBasicAuth
	want, _, err := tr.desired(translatorEnv(), local, "shop-home")
	if err != nil {
		t.Fatal(err)
	}
	remote := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "shop-home", Labels: reflectedLabels(nil)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("old"), "stale": nil},
	}
	assignIdentity(remote)

	merged := tr.merge(want, remote).(*corev1.Secret)
	checkKeptIdentity(t, merged)
	// The API server refuses this type change; the caller recreates.
	if merged.Type != corev1.SecretTypeBasicAuth {
		t.Errorf("type = %q, want the local one", merged.Type)
	}
	if !tr.equal(want, merged) {
		t.Errorf("merged copy %+v does not equal %+v", merged, want)
	}
	if string(remote.Data["password"]) != "old" || remote.Type != corev1.SecretTypeOpaque {
		t.Error("merge changed the remote object")
	}
}
