// Package certrotator provisions and rotates the serving certificate of
// ferry's admission webhook server without an external certificate manager.
//
// Every replica of the webhook server runs a Rotator. The replicas share one
// Secret (type kubernetes.io/tls) that holds a private CA ("ca.crt" and
// "ca.key") and the serving certificate signed by it ("tls.crt" and
// "tls.key"). Keeping the material in the API server rather than generating
// it per replica is what lets all replicas present certificates that verify
// against the single caBundle the API server uses to call the webhooks.
//
// Writes to the Secret use optimistic concurrency (create, or update with the
// resourceVersion that was read) and every replica re-reads the Secret after
// losing a race, so concurrently starting or rotating replicas converge on
// one CA and one serving certificate.
//
// "ca.crt" is a bundle: the CA that signs the current serving certificate
// comes first, followed by previous CAs that have not expired yet. That
// bundle is what gets injected into the webhook configurations, so a replica
// that still serves a certificate issued by the previous CA remains
// verifiable while the replicas pick up a rotated CA.
package certrotator

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Defaults applied by Start to zero-valued fields of Rotator.
const (
	// DefaultCAValidity is the lifetime of a generated CA. It is short enough
	// that rotating the CA is a routine, exercised code path, and long enough
	// that it happens only about once a year.
	DefaultCAValidity = 365 * 24 * time.Hour
	// DefaultCertValidity is the lifetime of a generated serving certificate
	// (it is additionally capped at the expiry of the CA that signs it).
	DefaultCertValidity = 90 * 24 * time.Hour
	// DefaultCheckInterval is how often the expiry of the certificates and the
	// caBundle of the webhook configurations are re-checked when no watch
	// event arrives. Start lowers it when the renewal window is shorter.
	DefaultCheckInterval = time.Hour
)

const (
	// maxRetryDelay caps the back-off between failed rotation passes, so a
	// transient API error does not leave the webhooks broken for a whole
	// CheckInterval.
	maxRetryDelay = 5 * time.Minute
	// minRetryDelay is the first back-off after a failed rotation pass.
	minRetryDelay = 500 * time.Millisecond
)

// Rotator keeps a CA and a serving certificate in a Secret up to date,
// serves the certificate through GetCertificate and injects the CA bundle
// into webhook configurations.
//
// Fill in the exported fields and run Start, for example by adding the
// Rotator to a controller-runtime manager. A Rotator must not be copied or
// reconfigured once Start has been called, and Start may be called only once.
type Rotator struct {
	// Client talks to the API server. It needs get, create and update on the
	// Secret, list and watch on Secrets in SecretNamespace, and get, patch,
	// list and watch on the named webhook configurations. All list and watch
	// requests carry a metadata.name field selector, so RBAC can restrict
	// them with resourceNames.
	Client kubernetes.Interface

	// SecretNamespace and SecretName name the Secret that holds the CA and
	// the serving certificate. It is shared by all replicas; it is created if
	// missing, and an existing (for example chart-provided, empty) Secret is
	// filled in.
	SecretNamespace, SecretName string

	// DNSNames are the DNS subject alternative names of the serving
	// certificate, typically <service>.<namespace>.svc.
	DNSNames []string
	// IPAddresses are extra IP subject alternative names of the serving
	// certificate.
	IPAddresses []net.IP

	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name
	// the configurations whose every webhook gets the CA bundle in
	// clientConfig.caBundle. A configuration that does not exist yet is
	// injected as soon as it appears.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string

	// CAValidity is the lifetime of a newly generated CA
	// (default DefaultCAValidity).
	CAValidity time.Duration
	// CertValidity is the lifetime of a newly issued serving certificate
	// (default DefaultCertValidity, or CAValidity if that is shorter). It must
	// not exceed CAValidity.
	CertValidity time.Duration
	// RenewBefore makes the CA and the serving certificate be replaced once
	// less than this much of their validity remains. By default each is
	// renewed when a third of its own validity remains. It must be shorter
	// than CertValidity, otherwise a fresh certificate would already be due.
	RenewBefore time.Duration
	// CheckInterval is how often expiry and the injected caBundle are
	// re-checked in addition to reacting to watch events (default
	// DefaultCheckInterval, lowered to half the serving certificate's renewal
	// window if that is shorter).
	CheckInterval time.Duration
	// Now returns the current time; tests replace it to simulate the passing
	// of time. Defaults to time.Now.
	Now func() time.Time

	initOnce  sync.Once
	ready     chan struct{}
	readyOnce sync.Once
	started   atomic.Bool
	// cert is the certificate handed out by GetCertificate.
	cert atomic.Pointer[tls.Certificate]

	// The fields below are owned by the goroutine running Start.
	cfg      *settings
	injected map[configRef]bool
	missing  map[configRef]bool
}

// settings is the validated and defaulted configuration of a Rotator. Start
// works on this copy so defaulting never writes to the caller's struct.
type settings struct {
	policy        issuePolicy
	checkInterval time.Duration
	now           func() time.Time
	configs       []configRef
}

// NeedLeaderElection reports false: every replica serves webhook requests
// and therefore needs a certificate, so the Rotator runs on all of them. It
// makes Rotator a controller-runtime manager.LeaderElectionRunnable.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Ready returns a channel that is closed once a serving certificate is
// available from GetCertificate and the CA bundle has been injected into
// every named webhook configuration at least once. Gate readiness probes on
// it so that a replica does not receive traffic the API server cannot
// verify.
func (r *Rotator) Ready() <-chan struct{} {
	r.init()
	return r.ready
}

// GetCertificate returns the current serving certificate. It is meant for
// tls.Config.GetCertificate, which is consulted on every handshake, so
// rotated certificates are served without restarting the server. It fails
// until the first certificate has been loaded.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("certrotator: no serving certificate loaded yet")
}

// Start validates the configuration, then keeps the Secret, the served
// certificate and the webhook configurations' caBundle up to date until ctx
// is cancelled. Failures talking to the API server are logged and retried
// with back-off rather than returned, because a replica that stops rotating
// would eventually serve an expired certificate. It returns nil once ctx is
// done, which makes Rotator a controller-runtime manager.Runnable.
func (r *Rotator) Start(ctx context.Context) error {
	cfg, err := r.validate()
	if err != nil {
		return err
	}
	if !r.started.CompareAndSwap(false, true) {
		return errors.New("certrotator: Start called more than once")
	}
	r.init()
	r.cfg = cfg
	r.injected = make(map[configRef]bool, len(cfg.configs))
	r.missing = make(map[configRef]bool)

	logger := log.FromContext(ctx).WithName("certrotator").
		WithValues("secret", r.SecretNamespace+"/"+r.SecretName)
	ctx = log.IntoContext(ctx, logger)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	// pokes coalesces watch events: however many arrive during a pass, at
	// most one more pass follows.
	pokes := make(chan struct{}, 1)
	poke := func() {
		select {
		case pokes <- struct{}{}:
		default:
		}
	}
	wg.Go(func() { r.watchSecret(ctx, poke) })
	for _, ref := range cfg.configs {
		wg.Go(func() { r.watchConfig(ctx, ref, poke) })
	}

	ticker := time.NewTicker(cfg.checkInterval)
	defer ticker.Stop()
	retryDelay := time.Duration(0)
	for {
		var retry <-chan time.Time
		needRetry, err := r.sync(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil || needRetry:
			retryDelay = nextRetryDelay(retryDelay, cfg.checkInterval)
			retry = time.After(retryDelay)
			if err != nil {
				logger.Error(err, "Certificate rotation pass failed; retrying", "retryIn", retryDelay)
			}
		default:
			retryDelay = 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-pokes:
		case <-retry:
		}
	}
}

// nextRetryDelay doubles the previous delay, bounded by the check interval
// (no point waiting longer than the next periodic pass) and maxRetryDelay.
func nextRetryDelay(prev, checkInterval time.Duration) time.Duration {
	limit := min(checkInterval, maxRetryDelay)
	d := min(minRetryDelay, limit)
	if prev > 0 {
		d = min(2*prev, limit)
	}
	return d
}

// sync runs one rotation pass: make sure the Secret holds valid material,
// inject its CA bundle, then serve its certificate. It reports whether a
// retry before the next CheckInterval is needed (an error, or a named
// configuration that does not exist yet).
func (r *Rotator) sync(ctx context.Context) (bool, error) {
	mat, err := r.ensureSecret(ctx)
	if err != nil {
		return true, err
	}
	missing, injectErr := r.injectAll(ctx, mat.bundlePEM)
	r.serve(ctx, mat, injectErr == nil)
	if r.cert.Load() != nil && len(r.injected) == len(r.cfg.configs) {
		r.readyOnce.Do(func() {
			log.FromContext(ctx).Info("Serving certificate loaded and CA bundle injected; ready")
			close(r.ready)
		})
	}
	return injectErr != nil || missing > 0, injectErr
}

// serve switches GetCertificate to the certificate in mat. When the bundle
// could not be injected everywhere, a certificate that is still trusted by
// the bundle the API server has is kept instead: a new CA might not have
// reached the webhook configurations yet, and the old certificate keeps
// verifying because the old CA stays in the bundle.
func (r *Rotator) serve(ctx context.Context, mat *material, injected bool) {
	cur := r.cert.Load()
	if cur != nil && bytes.Equal(cur.Leaf.Raw, mat.serving.Leaf.Raw) {
		return
	}
	logger := log.FromContext(ctx)
	if cur != nil && !injected && trustedBy(cur.Leaf, mat.bundle, r.cfg.now()) {
		logger.Info("Keeping the current serving certificate until the CA bundle is injected",
			"currentSerial", cur.Leaf.SerialNumber.Text(16), "pendingSerial", mat.serving.Leaf.SerialNumber.Text(16))
		return
	}
	r.cert.Store(mat.serving)
	logger.Info("Serving certificate loaded",
		"serial", mat.serving.Leaf.SerialNumber.Text(16),
		"issuer", mat.serving.Leaf.Issuer.CommonName,
		"notAfter", mat.serving.Leaf.NotAfter)
}

func (r *Rotator) init() {
	r.initOnce.Do(func() { r.ready = make(chan struct{}) })
}

// validate checks the exported fields and derives the effective settings.
func (r *Rotator) validate() (*settings, error) {
	switch {
	case r.Client == nil:
		return nil, errors.New("certrotator: Client is required")
	case r.SecretNamespace == "":
		return nil, errors.New("certrotator: SecretNamespace is required")
	case r.SecretName == "":
		return nil, errors.New("certrotator: SecretName is required")
	case len(r.DNSNames) == 0 && len(r.IPAddresses) == 0:
		return nil, errors.New("certrotator: DNSNames or IPAddresses is required (the serving certificate needs a subject alternative name)")
	}
	for i, n := range r.DNSNames {
		if n == "" {
			return nil, fmt.Errorf("certrotator: DNSNames[%d] is empty", i)
		}
	}
	for i, ip := range r.IPAddresses {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return nil, fmt.Errorf("certrotator: IPAddresses[%d] is not a valid IP address", i)
		}
	}
	var configs []configRef
	seen := map[configRef]bool{}
	for _, list := range []struct {
		field, kind string
		names       []string
	}{
		{"MutatingWebhookConfigurations", kindMutating, r.MutatingWebhookConfigurations},
		{"ValidatingWebhookConfigurations", kindValidating, r.ValidatingWebhookConfigurations},
	} {
		for i, n := range list.names {
			if n == "" {
				return nil, fmt.Errorf("certrotator: %s[%d] is empty", list.field, i)
			}
			ref := configRef{kind: list.kind, name: n}
			if !seen[ref] {
				seen[ref] = true
				configs = append(configs, ref)
			}
		}
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"CAValidity", r.CAValidity},
		{"CertValidity", r.CertValidity},
		{"RenewBefore", r.RenewBefore},
		{"CheckInterval", r.CheckInterval},
	} {
		if d.v < 0 {
			return nil, fmt.Errorf("certrotator: %s must not be negative, got %v", d.field, d.v)
		}
	}

	caValidity := r.CAValidity
	if caValidity == 0 {
		caValidity = DefaultCAValidity
	}
	certValidity := r.CertValidity
	if certValidity == 0 {
		certValidity = min(DefaultCertValidity, caValidity)
	}
	if certValidity > caValidity {
		return nil, fmt.Errorf("certrotator: CertValidity (%v) must not exceed CAValidity (%v)", certValidity, caValidity)
	}
	caRenew, certRenew := caValidity/3, certValidity/3
	if r.RenewBefore > 0 {
		if r.RenewBefore >= certValidity {
			return nil, fmt.Errorf("certrotator: RenewBefore (%v) must be shorter than CertValidity (%v)", r.RenewBefore, certValidity)
		}
		caRenew, certRenew = r.RenewBefore, r.RenewBefore
	}
	checkInterval := r.CheckInterval
	if checkInterval == 0 {
		checkInterval = min(DefaultCheckInterval, certRenew/2)
		if checkInterval <= 0 {
			checkInterval = time.Second
		}
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	return &settings{
		policy: issuePolicy{
			dnsNames:        append([]string(nil), r.DNSNames...),
			ips:             append([]net.IP(nil), r.IPAddresses...),
			caValidity:      caValidity,
			certValidity:    certValidity,
			caRenewBefore:   caRenew,
			certRenewBefore: certRenew,
		},
		checkInterval: checkInterval,
		now:           now,
		configs:       configs,
	}, nil
}
