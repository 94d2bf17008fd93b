// Package servingcert gives a virtual kubelet the serving certificate of
// its kubelet API: from files (cert-manager, an operator's PKI), reloaded
// when they change, or asked of the local cluster with a CertificateSigningRequest
// to the kubernetes.io/kubelet-serving signer, as a kubelet with
// serverTLSBootstrap does, and renewed before it expires. The consumer's API
// server trusts that signer's certificates when it verifies kubelets
// (--kubelet-certificate-authority); ferry-controller-manager approves the
// requests of virtual kubelets for their own node.
package servingcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// Source hands out the current serving certificate, nil while there is none.
type Source interface {
	Current() *tls.Certificate
}

// Request asks the local cluster for a kubelet serving certificate for
// nodeName with the given addresses, and renews it before it expires (at
// 70-90% of its lifetime, as client-go's certificate manager does). It runs
// until ctx is done.
func Request(ctx context.Context, kube kubernetes.Interface, nodeName string, ips []net.IP, dnsNames []string) (Source, error) {
	if len(ips) == 0 && len(dnsNames) == 0 {
		return nil, errors.New("a serving certificate needs at least one IP address or DNS name")
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return kube, nil },
		Template: &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
			IPAddresses: ips,
			DNSNames:    dnsNames,
		},
		SignerName: certificatesv1.KubeletServingSignerName,
		Usages: []certificatesv1.KeyUsage{
			certificatesv1.UsageDigitalSignature,
			certificatesv1.UsageServerAuth,
		},
		CertificateStore: &memoryStore{},
		Name:             "kubelet-serving",
	})
	if err != nil {
		return nil, fmt.Errorf("set up the serving certificate of node %s: %w", nodeName, err)
	}
	m.Start()
	context.AfterFunc(ctx, m.Stop)
	return m, nil
}

// memoryStore keeps the certificate in memory: a restarted virtual kubelet
// asks for a new one, so it keeps no state on disk.
type memoryStore struct {
	mu   sync.Mutex
	cert *tls.Certificate
}

func (s *memoryStore) Current() (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert == nil {
		return nil, new(certificate.NoCertKeyError("no serving certificate yet"))
	}
	return s.cert, nil
}

func (s *memoryStore) Update(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if c.Leaf == nil && len(c.Certificate) > 0 {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cert = &c
	return &c, nil
}

// Files serves the certificate and key in certFile and keyFile, reloaded
// when they change (checked every period), so a rotation by whoever writes
// them needs no restart. A file that fails to load keeps the previous pair.
func Files(ctx context.Context, certFile, keyFile string, period time.Duration) (Source, error) {
	f := &files{certFile: certFile, keyFile: keyFile}
	if err := f.load(); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if changed, err := f.changed(); err == nil && changed {
					if err := f.load(); err != nil {
						klog.FromContext(ctx).Error(err, "Keeping the previous serving certificate")
					} else {
						klog.FromContext(ctx).Info("Reloaded the serving certificate", "file", certFile)
					}
				}
			}
		}
	}()
	return f, nil
}

type files struct {
	certFile, keyFile string
	mu                sync.Mutex
	cert              *tls.Certificate
	certMod, keyMod   time.Time
}

func (f *files) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cert
}

func (f *files) modTimes() (time.Time, time.Time, error) {
	ci, err := os.Stat(f.certFile)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	ki, err := os.Stat(f.keyFile)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	return ci.ModTime(), ki.ModTime(), nil
}

func (f *files) changed() (bool, error) {
	c, k, err := f.modTimes()
	if err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return !c.Equal(f.certMod) || !k.Equal(f.keyMod), nil
}

func (f *files) load() error {
	c, k, err := f.modTimes()
	if err != nil {
		return fmt.Errorf("--kubelet-tls-cert-file/--kubelet-tls-key-file: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("--kubelet-tls-cert-file %s / --kubelet-tls-key-file %s: %w", f.certFile, f.keyFile, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cert, f.certMod, f.keyMod = &pair, c, k
	return nil
}
