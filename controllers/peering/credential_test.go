package peering

import (
	"encoding/base64"
	"testing"
	"time"
)

func jwt(payload string) string {
	return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
}

func TestTokenRenewalIsDueAfterTwoThirdsOfItsLifetime(t *testing.T) {
	c, err := parseToken(jwt(`{"iat":1000,"exp":4000,"kubernetes.io":{"namespace":"ferry-tenant-a","serviceaccount":{"name":"ferry-consumer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kubernetes.Namespace != "ferry-tenant-a" || c.Kubernetes.ServiceAccount.Name != "ferry-consumer" {
		t.Fatalf("claims = %+v", c)
	}
	for now, want := range map[int64]bool{1000: false, 2999: false, 3000: true, 5000: true} {
		if got := c.renewalDue(time.Unix(now, 0)); got != want {
			t.Errorf("renewalDue at %d = %v, want %v", now, got, want)
		}
	}
}

func TestParseTokenRefusesWhatItCannotRenew(t *testing.T) {
	for name, token := range map[string]string{
		"not a JWT":           "abc",
		"bad base64":          "a.!!!.c",
		"no expiry":           jwt(`{"iat":1000,"kubernetes.io":{"namespace":"n","serviceaccount":{"name":"s"}}}`),
		"expiry before issue": jwt(`{"iat":5000,"exp":4000,"kubernetes.io":{"namespace":"n","serviceaccount":{"name":"s"}}}`),
		"no service account":  jwt(`{"iat":1000,"exp":4000}`),
		"payload is not JSON": "e30." + base64.RawURLEncoding.EncodeToString([]byte("nope")) + ".s",
	} {
		if _, err := parseToken(token); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzParseToken: whatever a credentials Secret holds as a token, parsing
// never panics, and what it accepts can be renewed.
func FuzzParseToken(f *testing.F) {
	f.Add(jwt(`{"iat":1000,"exp":4000,"kubernetes.io":{"namespace":"ferry-tenant-a","serviceaccount":{"name":"ferry-consumer"}}}`))
	f.Add(jwt(`{"iat":4000,"exp":1000}`))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := parseToken(token)
		if err != nil {
			return
		}
		if c.Expiry <= c.IssuedAt || c.Kubernetes.Namespace == "" || c.Kubernetes.ServiceAccount.Name == "" {
			t.Fatalf("accepted claims that cannot be renewed: %+v", c)
		}
	})
}
