package kubeletcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func request(t *testing.T, tmpl *x509.CertificateRequest) ([]byte, *x509.CertificateRequest) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	cr, err := parseRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	return data, cr
}

func TestValidate(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ferry-eu"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeInternalDNS, Address: "vk-eu.ferry-system.svc"},
	}}}
	subject := pkix.Name{CommonName: "system:node:ferry-eu", Organization: []string{"system:nodes"}}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	tests := []struct {
		name    string
		tmpl    x509.CertificateRequest
		usages  []certificatesv1.KeyUsage
		wantErr []string
	}{
		{name: "the node's IP", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}}, usages: serving},
		{name: "the node's IP and DNS name, key encipherment", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}, DNSNames: []string{"vk-eu.ferry-system.svc"}},
			usages: append(serving, certificatesv1.UsageKeyEncipherment)},
		{name: "another IP", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.8")}}, usages: serving,
			wantErr: []string{"IP address 10.0.0.8 is not one of node ferry-eu's addresses"}},
		{name: "another name", tmpl: x509.CertificateRequest{Subject: subject, DNSNames: []string{"kubernetes.default.svc"}}, usages: serving,
			wantErr: []string{`DNS name "kubernetes.default.svc" is not one of node ferry-eu's addresses`}},
		{name: "no names", tmpl: x509.CertificateRequest{Subject: subject}, usages: serving, wantErr: []string{"at least one of the node's addresses"}},
		{name: "masters", tmpl: x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:ferry-eu", Organization: []string{"system:masters"}}, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}},
			usages: serving, wantErr: []string{`subject organization ["system:masters"]: must be exactly [system:nodes]`}},
		{name: "client auth", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}},
			usages: append(serving, certificatesv1.UsageClientAuth), wantErr: []string{`spec.usages: "client auth" is not a serving usage`}},
		{name: "no server auth", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}},
			usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}, wantErr: []string{"spec.usages: must include server auth"}},
		{name: "URI", tmpl: x509.CertificateRequest{Subject: subject, IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}},
			usages: serving, wantErr: []string{"no email addresses or URIs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, cr := request(t, &tt.tmpl)
			csr := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Request: data, Usages: tt.usages}}
			err := Validate(csr, cr, node)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestParseRequestRejectsGarbage(t *testing.T) {
	for _, in := range []string{"", "not pem", "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"} {
		if _, err := parseRequest([]byte(in)); err == nil || !strings.Contains(err.Error(), "spec.request") {
			t.Errorf("parseRequest(%q) = %v, want an error naming spec.request", in, err)
		}
	}
}
