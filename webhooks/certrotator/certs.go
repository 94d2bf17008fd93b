package certrotator

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the Secret. tls.crt and tls.key follow the kubernetes.io/tls
// convention; ca.crt follows the convention of cert-manager and service
// account token Secrets.
const (
	keyCACert  = "ca.crt"
	keyCAKey   = "ca.key"
	keyTLSCert = corev1.TLSCertKey
	keyTLSKey  = corev1.TLSPrivateKeyKey
)

const (
	// backdate moves NotBefore into the past so that replicas and API
	// servers whose clocks lag behind the issuing replica accept a freshly
	// issued certificate.
	backdate = time.Hour
	// maxRetainedCAs bounds how many previous CAs stay in the bundle. A
	// normal rotation needs one; the bound only matters if something makes
	// the CA rotate far more often than configured.
	maxRetainedCAs = 3
)

// issuePolicy is what the Secret has to satisfy. It is plain data so that
// the rotation decisions in planSecret can be tested without an API server.
type issuePolicy struct {
	dnsNames        []string
	ips             []net.IP
	caValidity      time.Duration
	certValidity    time.Duration
	caRenewBefore   time.Duration
	certRenewBefore time.Duration
}

// material is the parsed content of a Secret that satisfies the policy.
type material struct {
	// ca signs serving certificates; caKey is its private key.
	ca    *x509.Certificate
	caKey crypto.Signer
	// bundle is ca followed by previous, not yet expired CAs; bundlePEM is
	// its canonical encoding, as stored in ca.crt and injected as caBundle.
	bundle    []*x509.Certificate
	bundlePEM []byte
	// serving is the serving certificate, with Leaf populated.
	serving *tls.Certificate
}

// plan is the outcome of planSecret.
type plan struct {
	// data is the complete Secret data to store; keys other than the four
	// managed ones are carried over unchanged.
	data map[string][]byte
	// changed reports whether data differs from the input, i.e. whether
	// the Secret has to be written.
	changed bool
	// reasons says why the material was (re)generated, for logging.
	reasons []string
	mat     *material
}

// planSecret inspects the data of the Secret and decides what it must
// contain at time now: the existing material if it is still valid,
// otherwise a new serving certificate and, if the CA is missing, invalid or
// due for renewal, a new CA as well. Previous CAs that have not expired are
// kept in the bundle after the new CA, so certificates they issued keep
// verifying while replicas switch over. A retained CA is dropped once it
// expires, which is never earlier than the serving certificates it signed
// (those are capped at the CA's expiry).
func planSecret(data map[string][]byte, p issuePolicy, now time.Time) (*plan, error) {
	var reasons []string
	oldCAs := parseCertsPEM(data[keyCACert])

	ca, caKey, why := currentCA(oldCAs, data[keyCAKey])
	caKeyPEM := data[keyCAKey]
	switch {
	case ca == nil:
		reasons = append(reasons, "CA missing or invalid: "+why)
	case dueForRenewal(ca, now, p.caRenewBefore):
		reasons = append(reasons, fmt.Sprintf("CA expires at %s, renewing %v before", ca.NotAfter.UTC().Format(time.RFC3339), p.caRenewBefore))
		ca, caKey = nil, nil
	}
	newCA := ca == nil
	if newCA {
		var err error
		var key *ecdsa.PrivateKey
		if ca, key, err = generateCA(now, p.caValidity); err != nil {
			return nil, err
		}
		if caKeyPEM, err = encodeKeyPEM(key); err != nil {
			return nil, err
		}
		caKey = key
	}

	bundle := []*x509.Certificate{ca}
	for _, c := range oldCAs {
		if len(bundle) > maxRetainedCAs { // the current CA plus maxRetainedCAs
			break
		}
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(bundle, c.Equal) {
			bundle = append(bundle, c)
		}
	}
	bundlePEM := encodeCertsPEM(bundle)

	certPEM, keyPEM := data[keyTLSCert], data[keyTLSKey]
	serving, err := loadKeyPair(certPEM, keyPEM)
	if err == nil {
		if newCA {
			err = errors.New("must be reissued by the new CA")
		} else {
			err = checkServing(serving.Leaf, ca, p, now)
		}
	}
	if err != nil {
		reasons = append(reasons, "serving certificate: "+err.Error())
		leaf, key, err := issueServing(ca, caKey, p, now)
		if err != nil {
			return nil, err
		}
		certPEM = encodeCertsPEM([]*x509.Certificate{leaf})
		if keyPEM, err = encodeKeyPEM(key); err != nil {
			return nil, err
		}
		if serving, err = loadKeyPair(certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("certrotator: load freshly issued serving certificate: %w", err)
		}
	}

	out := make(map[string][]byte, len(data)+4)
	for k, v := range data {
		out[k] = v
	}
	out[keyCACert], out[keyCAKey] = bundlePEM, caKeyPEM
	out[keyTLSCert], out[keyTLSKey] = certPEM, keyPEM
	changed := false
	for _, k := range []string{keyCACert, keyCAKey, keyTLSCert, keyTLSKey} {
		if v, ok := data[k]; !ok || !bytes.Equal(v, out[k]) {
			changed = true
		}
	}
	if changed && len(reasons) == 0 {
		reasons = append(reasons, "CA bundle changed (expired CA dropped or bundle re-encoded)")
	}
	return &plan{
		data:    out,
		changed: changed,
		reasons: reasons,
		mat:     &material{ca: ca, caKey: caKey, bundle: bundle, bundlePEM: bundlePEM, serving: &serving},
	}, nil
}

// loadKeyPair parses a certificate and its key and makes sure Leaf is set
// (tls.X509KeyPair leaves it nil under GODEBUG x509keypairleaf=0), since the
// rotator inspects the served certificate.
func loadKeyPair(certPEM, keyPEM []byte) (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil || pair.Leaf != nil {
		return pair, err
	}
	pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0])
	return pair, err
}

// currentCA finds the certificate in the bundle that belongs to the CA key.
// It is normally the first one, but matching by key keeps a hand-edited
// bundle usable. why explains a nil result.
func currentCA(bundle []*x509.Certificate, keyPEM []byte) (ca *x509.Certificate, key crypto.Signer, why string) {
	if len(bundle) == 0 {
		return nil, nil, keyCACert + " holds no certificate"
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, err.Error()
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return nil, nil, "unsupported CA key type"
	}
	for _, c := range bundle {
		if pub.Equal(c.PublicKey) {
			if !c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0 {
				return nil, nil, "certificate matching " + keyCAKey + " is not a CA"
			}
			return c, key, ""
		}
	}
	return nil, nil, "no certificate in " + keyCACert + " matches " + keyCAKey
}

// checkServing reports why leaf cannot be served any more, or nil.
func checkServing(leaf *x509.Certificate, ca *x509.Certificate, p issuePolicy, now time.Time) error {
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("not issued by the current CA: %w", err)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return errors.New("not valid for server authentication")
	}
	if missing := missingSANs(leaf, p.dnsNames, p.ips); len(missing) > 0 {
		return fmt.Errorf("lacks subject alternative names %v", missing)
	}
	if dueForRenewal(leaf, now, p.certRenewBefore) {
		return fmt.Errorf("expires at %s, renewing %v before", leaf.NotAfter.UTC().Format(time.RFC3339), p.certRenewBefore)
	}
	return nil
}

// dueForRenewal reports whether at most renewBefore of cert's validity is
// left at now (which includes an expired cert).
func dueForRenewal(cert *x509.Certificate, now time.Time, renewBefore time.Duration) bool {
	return !now.Add(renewBefore).Before(cert.NotAfter)
}

// missingSANs returns the requested names and addresses cert does not cover.
// Extra SANs are tolerated so that replicas configured with a subset of the
// names do not fight over the certificate.
func missingSANs(cert *x509.Certificate, dnsNames []string, ips []net.IP) []string {
	var missing []string
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			missing = append(missing, n)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			missing = append(missing, ip.String())
		}
	}
	return missing
}

// trustedBy reports whether leaf is unexpired at now and signed by one of
// the CAs in bundle, i.e. whether a client holding bundle accepts it.
func trustedBy(leaf *x509.Certificate, bundle []*x509.Certificate, now time.Time) bool {
	if now.After(leaf.NotAfter) {
		return false
	}
	for _, ca := range bundle {
		if now.Before(ca.NotAfter) && leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}

// generateCA creates a self-signed CA that may only sign end-entity
// certificates (path length 0).
func generateCA(now time.Time, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"ferry"},
			CommonName:   fmt.Sprintf("ferry-webhook-ca@%d", now.Unix()),
		},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: parse CA certificate: %w", err)
	}
	return cert, key, nil
}

// issueServing signs a serving certificate for the policy's SANs. Its
// expiry is capped at the CA's, since it could not be verified afterwards.
func issueServing(ca *x509.Certificate, caKey crypto.Signer, p issuePolicy, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: generate serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	cn := ""
	if len(p.dnsNames) > 0 {
		cn = p.dnsNames[0]
	} else if len(p.ips) > 0 {
		cn = p.ips[0].String()
	}
	notAfter := now.Add(p.certValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"ferry"}, CommonName: cn},
		DNSNames:     p.dnsNames,
		IPAddresses:  p.ips,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		// ECDSA keys only sign; KeyEncipherment would be meaningless.
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: create serving certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certrotator: parse serving certificate: %w", err)
	}
	return cert, key, nil
}

// randomSerial returns a random, positive 128-bit serial number, as
// RFC 5280 recommends to make serials unpredictable.
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certrotator: generate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// parseCertsPEM returns the certificates in b, skipping blocks that are not
// certificates or do not parse: a damaged entry in the bundle should not
// make the valid ones unusable.
func parseCertsPEM(b []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

// encodeCertsPEM is the canonical encoding of certificates, so that equal
// bundles compare equal byte for byte and no replica patches needlessly.
func encodeCertsPEM(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

func encodeKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certrotator: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseKeyPEM accepts PKCS#8, SEC 1 (EC) and PKCS#1 (RSA) keys, so that a
// CA provided by an administrator in any common format can be adopted.
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New(keyCAKey + " holds no PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s holds an unsupported PEM block %q", keyCAKey, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", keyCAKey, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s is not a signing key", keyCAKey)
	}
	return signer, nil
}
