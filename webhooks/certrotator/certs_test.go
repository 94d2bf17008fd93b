package certrotator

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	day        = 24 * time.Hour
	testDNS    = "ferry-webhook.ferry-system.svc"
	testDNSAlt = "ferry-webhook.ferry-system.svc.cluster.local"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func testPolicy() issuePolicy {
	return issuePolicy{
		dnsNames:        []string{testDNS},
		ips:             []net.IP{net.ParseIP("127.0.0.1")},
		caValidity:      365 * day,
		certValidity:    90 * day,
		caRenewBefore:   365 * day / 3,
		certRenewBefore: 30 * day,
	}
}

func mustPlan(t *testing.T, data map[string][]byte, p issuePolicy, now time.Time) *plan {
	t.Helper()
	pl, err := planSecret(data, p, now)
	if err != nil {
		t.Fatalf("planSecret: %v", err)
	}
	return pl
}

func leafOf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(data[keyTLSCert], data[keyTLSKey])
	if err != nil {
		t.Fatalf("tls.crt/tls.key do not form a key pair: %v", err)
	}
	return pair.Leaf
}

// verify checks leaf the way an API server holding caBundle does.
func verify(leaf *x509.Certificate, caBundle []byte, name string, now time.Time) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return errNoCerts
	}
	_, err := leaf.Verify(x509.VerifyOptions{
		Roots:       pool,
		DNSName:     name,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

var errNoCerts = errors.New("bundle holds no certificates")

func TestPlanSecretGeneratesFromScratch(t *testing.T) {
	p := mustPlan(t, map[string][]byte{"unrelated": []byte("kept")}, testPolicy(), t0)
	if !p.changed {
		t.Fatal("empty Secret: changed = false, want true")
	}
	if len(p.reasons) == 0 {
		t.Error("no reasons given for generating material")
	}
	if got := string(p.data["unrelated"]); got != "kept" {
		t.Errorf("unrelated key = %q, want it carried over", got)
	}
	for _, k := range []string{keyCACert, keyCAKey, keyTLSCert, keyTLSKey} {
		if len(p.data[k]) == 0 {
			t.Errorf("key %s is empty", k)
		}
	}

	cas := parseCertsPEM(p.data[keyCACert])
	if len(cas) != 1 {
		t.Fatalf("ca.crt holds %d certificates, want 1", len(cas))
	}
	ca := cas[0]
	if !ca.IsCA || !ca.BasicConstraintsValid || ca.MaxPathLen != 0 || !ca.MaxPathLenZero {
		t.Errorf("CA constraints: IsCA=%v basic=%v maxPathLen=%d zero=%v", ca.IsCA, ca.BasicConstraintsValid, ca.MaxPathLen, ca.MaxPathLenZero)
	}
	if ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA KeyUsage %v lacks CertSign", ca.KeyUsage)
	}
	if _, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("CA key is %T, want ECDSA", ca.PublicKey)
	}
	if !ca.NotBefore.Before(t0) {
		t.Errorf("CA NotBefore %v is not backdated before %v", ca.NotBefore, t0)
	}
	if want := t0.Add(365 * day); !ca.NotAfter.Equal(want) {
		t.Errorf("CA NotAfter = %v, want %v", ca.NotAfter, want)
	}

	leaf := leafOf(t, p.data)
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("serving key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	if leaf.IsCA {
		t.Error("serving certificate is a CA")
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("serving KeyUsage = %v, want DigitalSignature only", leaf.KeyUsage)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("serving ExtKeyUsage = %v, want [ServerAuth]", leaf.ExtKeyUsage)
	}
	if !leaf.NotBefore.Before(t0) {
		t.Errorf("serving NotBefore %v is not backdated before %v", leaf.NotBefore, t0)
	}
	if want := t0.Add(90 * day); !leaf.NotAfter.Equal(want) {
		t.Errorf("serving NotAfter = %v, want %v", leaf.NotAfter, want)
	}
	if leaf.SerialNumber.Sign() <= 0 || leaf.SerialNumber.Cmp(ca.SerialNumber) == 0 {
		t.Errorf("serials CA=%v serving=%v, want positive and distinct", ca.SerialNumber, leaf.SerialNumber)
	}

	for _, name := range []string{testDNS, "127.0.0.1"} {
		if err := verify(leaf, p.data[keyCACert], name, t0); err != nil {
			t.Errorf("verify serving certificate for %s: %v", name, err)
		}
	}
	if err := verify(leaf, p.data[keyCACert], "other.ferry-system.svc", t0); err == nil {
		t.Error("serving certificate verified for a name it was not issued for")
	}
	if !bytes.Equal(p.mat.bundlePEM, p.data[keyCACert]) || !p.mat.ca.Equal(ca) {
		t.Error("returned material does not match the Secret data")
	}
	if !bytes.Equal(p.mat.serving.Leaf.Raw, leaf.Raw) {
		t.Error("returned serving certificate does not match tls.crt")
	}
}

func TestPlanSecretSerialsAreRandom(t *testing.T) {
	a := leafOf(t, mustPlan(t, nil, testPolicy(), t0).data)
	b := leafOf(t, mustPlan(t, nil, testPolicy(), t0).data)
	if a.SerialNumber.Cmp(b.SerialNumber) == 0 {
		t.Errorf("two certificates issued at the same time share serial %v", a.SerialNumber)
	}
}

func TestPlanSecretReusesValidMaterial(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	for _, at := range []time.Duration{0, day, 59 * day} {
		again := mustPlan(t, first.data, testPolicy(), t0.Add(at))
		if again.changed {
			t.Errorf("after %v: changed = true (reasons %v), want the valid material reused", at, again.reasons)
		}
		if !bytes.Equal(again.mat.serving.Leaf.Raw, first.mat.serving.Leaf.Raw) {
			t.Errorf("after %v: a different serving certificate was returned", at)
		}
	}
}

func TestPlanSecretSANs(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)

	subset := testPolicy()
	subset.ips = nil
	if p := mustPlan(t, first.data, subset, t0); p.changed {
		t.Errorf("policy with fewer SANs: changed = true (%v), want extra SANs tolerated", p.reasons)
	}

	more := testPolicy()
	more.dnsNames = append(more.dnsNames, testDNSAlt)
	p := mustPlan(t, first.data, more, t0)
	if !p.changed {
		t.Fatal("policy with an additional DNS name: changed = false, want a new serving certificate")
	}
	if !bytes.Equal(p.data[keyCACert], first.data[keyCACert]) || !bytes.Equal(p.data[keyCAKey], first.data[keyCAKey]) {
		t.Error("the CA changed although only the SANs did")
	}
	leaf := leafOf(t, p.data)
	if err := verify(leaf, p.data[keyCACert], testDNSAlt, t0); err != nil {
		t.Errorf("new serving certificate does not verify for %s: %v", testDNSAlt, err)
	}
	if got := missingSANs(leaf, more.dnsNames, more.ips); len(got) != 0 {
		t.Errorf("new serving certificate lacks %v", got)
	}
}

func TestDueForRenewal(t *testing.T) {
	cert := &x509.Certificate{NotAfter: t0.Add(90 * day)}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{t0, false},
		{t0.Add(59 * day), false},
		{t0.Add(60*day - time.Second), false},
		{t0.Add(60 * day), true}, // exactly renewBefore left
		{t0.Add(61 * day), true},
		{t0.Add(91 * day), true}, // expired
	} {
		if got := dueForRenewal(cert, tc.now, 30*day); got != tc.want {
			t.Errorf("dueForRenewal at %v = %v, want %v", tc.now.Sub(t0), got, tc.want)
		}
	}
}

func TestPlanSecretRenewsServingCertWithSameCA(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	now := t0.Add(61 * day)
	p := mustPlan(t, first.data, testPolicy(), now)
	if !p.changed {
		t.Fatal("serving certificate due: changed = false")
	}
	if !bytes.Equal(p.data[keyCACert], first.data[keyCACert]) || !bytes.Equal(p.data[keyCAKey], first.data[keyCAKey]) {
		t.Error("CA changed although only the serving certificate was due")
	}
	leaf := leafOf(t, p.data)
	if leaf.SerialNumber.Cmp(first.mat.serving.Leaf.SerialNumber) == 0 {
		t.Error("serving certificate was not replaced")
	}
	if want := now.Add(90 * day); !leaf.NotAfter.Equal(want) {
		t.Errorf("renewed NotAfter = %v, want %v", leaf.NotAfter, want)
	}
	if err := verify(leaf, p.data[keyCACert], testDNS, now); err != nil {
		t.Errorf("renewed certificate does not verify: %v", err)
	}
}

func TestPlanSecretRotatesCAKeepingOldCAInBundle(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	// Keep the serving certificate fresh until shortly before the CA is due,
	// as the periodic check would.
	before := mustPlan(t, first.data, testPolicy(), t0.Add(230*day))
	oldLeaf := before.mat.serving.Leaf
	if !before.mat.ca.Equal(first.mat.ca) {
		t.Fatal("CA rotated before it was due")
	}

	now := t0.Add(250 * day) // 115 days left < 365/3
	p := mustPlan(t, before.data, testPolicy(), now)
	if !p.changed {
		t.Fatal("CA due: changed = false")
	}
	bundle := parseCertsPEM(p.data[keyCACert])
	if len(bundle) != 2 {
		t.Fatalf("bundle holds %d CAs during rotation, want 2 (new + old)", len(bundle))
	}
	if bundle[0].Equal(first.mat.ca) || !bundle[0].Equal(p.mat.ca) {
		t.Error("the bundle does not start with the new CA")
	}
	if !bundle[1].Equal(first.mat.ca) {
		t.Error("the old CA is not kept in the bundle")
	}
	key, err := parseKeyPEM(p.data[keyCAKey])
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(*ecdsa.PublicKey).Equal(bundle[0].PublicKey) {
		t.Error("ca.key does not belong to the new CA")
	}
	newLeaf := leafOf(t, p.data)
	if err := newLeaf.CheckSignatureFrom(bundle[0]); err != nil {
		t.Errorf("new serving certificate is not signed by the new CA: %v", err)
	}
	// Both the new certificate and the one replicas may still serve must
	// verify against the injected bundle.
	for name, leaf := range map[string]*x509.Certificate{"new": newLeaf, "old": oldLeaf} {
		if err := verify(leaf, p.data[keyCACert], testDNS, now); err != nil {
			t.Errorf("%s serving certificate does not verify against the rotation bundle: %v", name, err)
		}
	}
	// The old bundle would not trust the new certificate, which is why the
	// bundle has to be injected before the new certificate is served.
	if err := verify(newLeaf, first.data[keyCACert], testDNS, now); err == nil {
		t.Error("new serving certificate verified against the old bundle only")
	}

	// A second pass keeps the rotated material and the retained CA.
	if again := mustPlan(t, p.data, testPolicy(), now.Add(day)); again.changed {
		t.Errorf("after rotation: changed = true (%v)", again.reasons)
	}

	// Once the old CA has expired it is dropped from the bundle.
	after := mustPlan(t, p.data, testPolicy(), first.mat.ca.NotAfter.Add(time.Minute))
	if got := parseCertsPEM(after.data[keyCACert]); len(got) != 1 || !got[0].Equal(p.mat.ca) {
		t.Errorf("after the old CA expired the bundle holds %d CAs, want only the new one", len(got))
	}
	if !bytes.Equal(after.data[keyCAKey], p.data[keyCAKey]) {
		t.Error("pruning the bundle replaced the CA key")
	}
}

// TestPlanSecretLongRun simulates a daily check over several CA lifetimes and
// checks that a client holding the bundle of any day trusts both the
// certificate issued that day and the one served the day before.
func TestPlanSecretLongRun(t *testing.T) {
	pol := testPolicy()
	data := map[string][]byte(nil)
	var prevLeaf *x509.Certificate
	caRotations, certRotations := 0, 0
	var prevCA *x509.Certificate
	for d := 0; d < 3*365; d++ {
		now := t0.Add(time.Duration(d) * day)
		p := mustPlan(t, data, pol, now)
		data = p.data
		leaf := p.mat.serving.Leaf
		if prevCA != nil && !prevCA.Equal(p.mat.ca) {
			caRotations++
		}
		if prevLeaf != nil && !prevLeaf.Equal(leaf) {
			certRotations++
		}
		if err := verify(leaf, p.mat.bundlePEM, testDNS, now); err != nil {
			t.Fatalf("day %d: current certificate does not verify: %v", d, err)
		}
		if prevLeaf != nil {
			if err := verify(prevLeaf, p.mat.bundlePEM, testDNS, now); err != nil {
				t.Fatalf("day %d: previous day's certificate does not verify: %v", d, err)
			}
		}
		if n := len(p.mat.bundle); n > 2 {
			t.Fatalf("day %d: bundle holds %d CAs, want at most 2", d, n)
		}
		prevLeaf, prevCA = leaf, p.mat.ca
	}
	if caRotations < 3 || certRotations < 15 {
		t.Errorf("over 3 years: %d CA and %d serving rotations, want at least 3 and 15", caRotations, certRotations)
	}
}

func TestPlanSecretReplacesInvalidCA(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	otherKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherKeyPEM, err := encodeKeyPEM(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, caKey := range map[string][]byte{
		"garbage key":    []byte("not a key"),
		"missing key":    nil,
		"mismatched key": otherKeyPEM,
	} {
		t.Run(name, func(t *testing.T) {
			data := map[string][]byte{}
			for k, v := range first.data {
				data[k] = v
			}
			data[keyCAKey] = caKey
			p := mustPlan(t, data, testPolicy(), t0)
			if !p.changed || p.mat.ca.Equal(first.mat.ca) {
				t.Fatal("CA was not replaced")
			}
			bundle := parseCertsPEM(p.data[keyCACert])
			if len(bundle) != 2 || !bundle[1].Equal(first.mat.ca) {
				t.Errorf("bundle holds %d CAs, want the new one and the unexpired old one", len(bundle))
			}
			if err := verify(leafOf(t, p.data), p.data[keyCACert], testDNS, t0); err != nil {
				t.Errorf("new serving certificate does not verify: %v", err)
			}
		})
	}
}

func TestPlanSecretReplacesForeignServingCert(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	other := mustPlan(t, nil, testPolicy(), t0)
	data := map[string][]byte{}
	for k, v := range first.data {
		data[k] = v
	}
	data[keyTLSCert], data[keyTLSKey] = other.data[keyTLSCert], other.data[keyTLSKey]
	p := mustPlan(t, data, testPolicy(), t0)
	if !p.changed || !p.mat.ca.Equal(first.mat.ca) {
		t.Fatalf("changed=%v, CA kept=%v; want a new serving certificate from the existing CA", p.changed, p.mat.ca.Equal(first.mat.ca))
	}
	if err := p.mat.serving.Leaf.CheckSignatureFrom(first.mat.ca); err != nil {
		t.Errorf("serving certificate not signed by the CA: %v", err)
	}
}

func TestPlanSecretAdoptsProvidedCA(t *testing.T) {
	ca, key, err := generateCA(t0, 365*day)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{
		keyCACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}),
		keyCAKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
	}
	p := mustPlan(t, data, testPolicy(), t0)
	if !p.mat.ca.Equal(ca) {
		t.Fatal("a valid provided CA was replaced")
	}
	if !bytes.Equal(p.data[keyCAKey], data[keyCAKey]) {
		t.Error("the provided CA key was re-encoded")
	}
	if err := p.mat.serving.Leaf.CheckSignatureFrom(ca); err != nil {
		t.Errorf("serving certificate not signed by the provided CA: %v", err)
	}
}

func TestPlanSecretDropsExpiredAndBoundsRetainedCAs(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	expired, _, err := generateCA(t0.Add(-400*day), 365*day)
	if err != nil {
		t.Fatal(err)
	}
	extra := []*x509.Certificate{first.mat.ca, expired}
	for range maxRetainedCAs + 2 {
		c, _, err := generateCA(t0, 365*day)
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, c)
	}
	data := map[string][]byte{}
	for k, v := range first.data {
		data[k] = v
	}
	data[keyCACert] = encodeCertsPEM(extra)
	p := mustPlan(t, data, testPolicy(), t0)
	if !p.changed {
		t.Fatal("changed = false, want the bundle cleaned up")
	}
	bundle := parseCertsPEM(p.data[keyCACert])
	if len(bundle) != 1+maxRetainedCAs {
		t.Errorf("bundle holds %d CAs, want %d", len(bundle), 1+maxRetainedCAs)
	}
	if !bundle[0].Equal(first.mat.ca) {
		t.Error("the current CA is not first")
	}
	if slices.ContainsFunc(bundle, expired.Equal) {
		t.Error("the expired CA was kept")
	}
}

func TestTrustedBy(t *testing.T) {
	first := mustPlan(t, nil, testPolicy(), t0)
	other := mustPlan(t, nil, testPolicy(), t0)
	leaf := first.mat.serving.Leaf
	if !trustedBy(leaf, first.mat.bundle, t0) {
		t.Error("certificate not trusted by its own bundle")
	}
	if trustedBy(leaf, other.mat.bundle, t0) {
		t.Error("certificate trusted by a foreign bundle")
	}
	if trustedBy(leaf, first.mat.bundle, leaf.NotAfter.Add(time.Second)) {
		t.Error("expired certificate trusted")
	}
}

func TestCABundlePatch(t *testing.T) {
	bundle := []byte("BUNDLE")
	ops, stale := caBundlePatch([]webhookCA{
		{name: "a", caBundle: bundle},
		{name: "b"},
		{name: "c", caBundle: []byte("OLD")},
	}, bundle)
	if stale != 2 {
		t.Errorf("stale = %d, want 2", stale)
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/webhooks/1/name","value":"b"},` +
		`{"op":"add","path":"/webhooks/1/clientConfig/caBundle","value":"QlVORExF"},` +
		`{"op":"test","path":"/webhooks/2/name","value":"c"},` +
		`{"op":"add","path":"/webhooks/2/clientConfig/caBundle","value":"QlVORExF"}]`
	if string(raw) != want {
		t.Errorf("patch =\n%s\nwant\n%s", raw, want)
	}
	if _, stale := caBundlePatch([]webhookCA{{name: "a", caBundle: bundle}}, bundle); stale != 0 {
		t.Errorf("up-to-date webhook: stale = %d, want 0", stale)
	}
}

func TestParseKeyPEMRejectsUnsupported(t *testing.T) {
	for _, in := range []string{"", "junk", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"} {
		if _, err := parseKeyPEM([]byte(in)); err == nil || !strings.Contains(err.Error(), keyCAKey) {
			t.Errorf("parseKeyPEM(%q) error = %v, want one naming %s", in, err, keyCAKey)
		}
	}
}
