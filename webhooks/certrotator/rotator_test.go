package certrotator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

var (
	_ manager.Runnable               = (*Rotator)(nil)
	_ manager.LeaderElectionRunnable = (*Rotator)(nil)
)

const (
	testNamespace  = "ferry-system"
	testSecret     = "ferry-webhook-certs"
	testMutating   = "ferry-mutating"
	testValidating = "ferry-validating"
	// waitTimeout bounds every wait; passing tests finish far sooner.
	waitTimeout = 10 * time.Second
)

var secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")

// fakeClock is a settable clock shared by rotators under test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func mutatingConfig(name string, webhooks ...string) *admissionregistrationv1.MutatingWebhookConfiguration {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, wh := range webhooks {
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.MutatingWebhook{Name: wh, ClientConfig: clientConfig()})
	}
	return cfg
}

func validatingConfig(name string, webhooks ...string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, wh := range webhooks {
		cfg.Webhooks = append(cfg.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: wh, ClientConfig: clientConfig()})
	}
	return cfg
}

func clientConfig() admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: testNamespace, Name: "ferry-webhook"},
	}
}

// newClient returns a fake clientset that, unlike the plain fake, rejects
// Secret updates carrying a stale resourceVersion, as the API server does.
func newClient(objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objs...)
	var rv atomic.Int64
	next := func() string { return strconv.FormatInt(rv.Add(1), 10) }
	cs.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).ResourceVersion = next()
		return false, nil, nil
	})
	cs.PrependReactor("update", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.UpdateAction).GetObject().(*corev1.Secret)
		stored, err := cs.Tracker().Get(secretsGVR, s.Namespace, s.Name)
		if err != nil {
			return true, nil, err
		}
		if got := stored.(*corev1.Secret).ResourceVersion; got != s.ResourceVersion {
			return true, nil, apierrors.NewConflict(secretsGVR.GroupResource(), s.Name,
				fmt.Errorf("resourceVersion %q is stale, stored is %q", s.ResourceVersion, got))
		}
		s.ResourceVersion = next()
		return false, nil, nil
	})
	return cs
}

func newRotator(cs *fake.Clientset) *Rotator {
	return &Rotator{
		Client:                          cs,
		SecretNamespace:                 testNamespace,
		SecretName:                      testSecret,
		DNSNames:                        []string{testDNS},
		IPAddresses:                     []net.IP{net.ParseIP("127.0.0.1")},
		MutatingWebhookConfigurations:   []string{testMutating},
		ValidatingWebhookConfigurations: []string{testValidating},
		CheckInterval:                   20 * time.Millisecond,
	}
}

// start runs r.Start until the test ends and checks that it returns nil
// promptly once its context is cancelled, i.e. leaves no goroutines behind.
func start(t *testing.T, r *Rotator) {
	t.Helper()
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), testr.New(t)))
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v after cancel, want nil", err)
			}
		case <-time.After(waitTimeout):
			t.Error("Start did not return after its context was cancelled")
		}
	})
}

// eventually polls cond until it returns "" or the timeout passes, then
// fails with cond's last complaint.
func eventually(t *testing.T, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitReady(t *testing.T, r *Rotator) {
	t.Helper()
	select {
	case <-r.Ready():
	case <-time.After(waitTimeout):
		t.Fatal("Ready was not closed")
	}
}

// quiesce waits until the rotators on cs stop making API calls, so that a
// following change can only be noticed through a watch event (the tests
// using it set a long CheckInterval).
func quiesce(t *testing.T, cs *fake.Clientset) {
	t.Helper()
	const quiet = 150 * time.Millisecond
	deadline := time.Now().Add(waitTimeout)
	n, since := len(cs.Actions()), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatal("the rotators kept calling the API")
		}
		time.Sleep(10 * time.Millisecond)
		if m := len(cs.Actions()); m != n {
			n, since = m, time.Now()
		}
	}
}

func getSecret(t *testing.T, cs *fake.Clientset) *corev1.Secret {
	t.Helper()
	s, err := cs.CoreV1().Secrets(testNamespace).Get(context.Background(), testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Secret: %v", err)
	}
	return s
}

// caBundles returns the caBundle of every webhook of both test
// configurations.
func caBundles(t *testing.T, cs *fake.Clientset) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ctx := context.Background()
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, testMutating, metav1.GetOptions{})
	if err == nil {
		for _, wh := range m.Webhooks {
			out["mutating/"+wh.Name] = wh.ClientConfig.CABundle
		}
	}
	v, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, testValidating, metav1.GetOptions{})
	if err == nil {
		for _, wh := range v.Webhooks {
			out["validating/"+wh.Name] = wh.ClientConfig.CABundle
		}
	}
	return out
}

// allBundlesEqual complains unless every webhook carries want.
func allBundlesEqual(t *testing.T, cs *fake.Clientset, want []byte, webhooks int) string {
	got := caBundles(t, cs)
	if len(got) != webhooks {
		return fmt.Sprintf("found %d webhooks, want %d", len(got), webhooks)
	}
	for name, b := range got {
		if !bytes.Equal(b, want) {
			return fmt.Sprintf("webhook %s has a caBundle of %d bytes that differs from the wanted %d bytes", name, len(b), len(want))
		}
	}
	return ""
}

func served(t *testing.T, r *Rotator) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	return c.Leaf
}

func TestStartValidates(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		want   string
		mutate func(*Rotator)
	}{
		{"Client is required", func(r *Rotator) { r.Client = nil }},
		{"SecretNamespace is required", func(r *Rotator) { r.SecretNamespace = "" }},
		{"SecretName is required", func(r *Rotator) { r.SecretName = "" }},
		{"DNSNames or IPAddresses is required", func(r *Rotator) { r.DNSNames, r.IPAddresses = nil, nil }},
		{"DNSNames[1] is empty", func(r *Rotator) { r.DNSNames = []string{"a", ""} }},
		{"IPAddresses[0] is not a valid IP address", func(r *Rotator) { r.IPAddresses = []net.IP{{1, 2}} }},
		{"MutatingWebhookConfigurations[0] is empty", func(r *Rotator) { r.MutatingWebhookConfigurations = []string{""} }},
		{"ValidatingWebhookConfigurations[0] is empty", func(r *Rotator) { r.ValidatingWebhookConfigurations = []string{""} }},
		{"CAValidity must not be negative", func(r *Rotator) { r.CAValidity = -time.Hour }},
		{"CheckInterval must not be negative", func(r *Rotator) { r.CheckInterval = -time.Hour }},
		{"CertValidity (48h0m0s) must not exceed CAValidity (24h0m0s)", func(r *Rotator) { r.CAValidity, r.CertValidity = 24*time.Hour, 48*time.Hour }},
		{"RenewBefore (2160h0m0s) must be shorter than CertValidity (2160h0m0s)", func(r *Rotator) { r.RenewBefore = 90 * day }},
	} {
		t.Run(tc.want, func(t *testing.T) {
			r := newRotator(cs)
			tc.mutate(r)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			err := r.Start(ctx)
			if err == nil || !strings.HasPrefix(err.Error(), "certrotator: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("invalid configurations made %d API calls, want none", n)
	}
}

func TestDefaults(t *testing.T) {
	r := newRotator(fake.NewClientset())
	r.CheckInterval = 0
	cfg, err := r.validate()
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.policy
	if p.caValidity != DefaultCAValidity || p.certValidity != DefaultCertValidity ||
		p.caRenewBefore != DefaultCAValidity/3 || p.certRenewBefore != DefaultCertValidity/3 ||
		cfg.checkInterval != DefaultCheckInterval {
		t.Errorf("defaults = %+v, checkInterval %v", p, cfg.checkInterval)
	}

	r.CAValidity, r.RenewBefore = 48*time.Hour, 40*time.Minute
	if cfg, err = r.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.policy.certValidity != 48*time.Hour || cfg.policy.caRenewBefore != 40*time.Minute ||
		cfg.policy.certRenewBefore != 40*time.Minute || cfg.checkInterval != 20*time.Minute {
		t.Errorf("derived settings = %+v, checkInterval %v", cfg.policy, cfg.checkInterval)
	}
}

func TestGetCertificateBeforeStart(t *testing.T) {
	r := newRotator(fake.NewClientset())
	if c, err := r.GetCertificate(nil); err == nil || c != nil {
		t.Errorf("GetCertificate before Start = %v, %v; want an error", c, err)
	}
	select {
	case <-r.Ready():
		t.Error("Ready closed before Start")
	default:
	}
	if r.NeedLeaderElection() {
		t.Error("NeedLeaderElection = true, want every replica to run the rotator")
	}
}

func TestStartCreatesSecretAndInjects(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "pods.ferry.io", "shadow.ferry.io"), validatingConfig(testValidating, "quota.ferry.io"))
	r := newRotator(cs)
	start(t, r)
	waitReady(t, r)

	secret := getSecret(t, cs)
	if secret.Type != corev1.SecretTypeTLS {
		t.Errorf("Secret type = %q, want %q", secret.Type, corev1.SecretTypeTLS)
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("Secret key %s is empty", k)
		}
	}
	if msg := allBundlesEqual(t, cs, secret.Data["ca.crt"], 3); msg != "" {
		t.Error(msg)
	}
	if leaf := served(t, r); !bytes.Equal(leaf.Raw, leafOf(t, secret.Data).Raw) {
		t.Error("GetCertificate does not serve the certificate in the Secret")
	}

	// A TLS client that trusts the injected bundle can connect by IP.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundles(t, cs)["mutating/pods.ferry.io"]) {
		t.Fatal("injected caBundle holds no certificate")
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			err = conn.(*tls.Conn).Handshake()
			_ = conn.Close()
		}
		srvErr <- err
	}()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: waitTimeout}, "tcp", ln.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS handshake with the injected bundle: %v", err)
	}
	_ = conn.Close()
	if err := <-srvErr; err != nil {
		t.Errorf("server side of the handshake: %v", err)
	}
}

func TestStartReusesExistingSecret(t *testing.T) {
	p := mustPlan(t, nil, testPolicy(), time.Now())
	existing := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret, ResourceVersion: "1"},
		Type:       corev1.SecretTypeTLS,
		Data:       p.data,
	}
	cs := newClient(existing, mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r := newRotator(cs)
	start(t, r)
	waitReady(t, r)
	if !bytes.Equal(served(t, r).Raw, p.mat.serving.Leaf.Raw) {
		t.Error("a valid existing certificate was not reused")
	}
	for _, a := range cs.Actions() {
		if a.GetResource() == secretsGVR && (a.GetVerb() == "update" || a.GetVerb() == "create") {
			t.Errorf("valid Secret was written: %s", a.GetVerb())
		}
	}
}

func TestStartWaitsForMissingConfiguration(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "a"))
	r := newRotator(cs)
	r.CheckInterval = time.Hour // only watch events and retries may help
	start(t, r)

	eventually(t, func() string {
		if _, err := r.GetCertificate(nil); err != nil {
			return err.Error()
		}
		return ""
	})
	select {
	case <-r.Ready():
		t.Fatal("Ready closed although the validating configuration does not exist")
	case <-time.After(100 * time.Millisecond):
	}

	_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(),
		validatingConfig(testValidating, "b", "c"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, r)
	eventually(t, func() string { return allBundlesEqual(t, cs, getSecret(t, cs).Data["ca.crt"], 3) })
}

func TestStartReinjectsReappliedConfiguration(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "a", "b"), validatingConfig(testValidating, "c"))
	r := newRotator(cs)
	r.CheckInterval = time.Hour // the re-injection must come from the watch
	start(t, r)
	waitReady(t, r)
	quiesce(t, cs)
	bundle := getSecret(t, cs).Data["ca.crt"]

	// Re-apply both configurations as they are in the manifests, without
	// caBundle.
	ctx := context.Background()
	m, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, testMutating, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Webhooks[1].ClientConfig.CABundle = nil
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, testValidating, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, validatingConfig(testValidating, "c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string { return allBundlesEqual(t, cs, bundle, 3) })
}

func TestStartRecreatesDeletedSecret(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r := newRotator(cs)
	r.CheckInterval = time.Hour // the Secret watch must notice
	start(t, r)
	waitReady(t, r)
	quiesce(t, cs)
	old := served(t, r)
	if err := cs.CoreV1().Secrets(testNamespace).Delete(context.Background(), testSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		s, err := cs.CoreV1().Secrets(testNamespace).Get(context.Background(), testSecret, metav1.GetOptions{})
		if err != nil {
			return "Secret not recreated: " + err.Error()
		}
		if msg := allBundlesEqual(t, cs, s.Data["ca.crt"], 2); msg != "" {
			return msg
		}
		if c, _ := r.GetCertificate(nil); c.Leaf.Equal(old) || !bytes.Equal(c.Leaf.Raw, leafOf(t, s.Data).Raw) {
			return "the recreated certificate is not served"
		}
		return ""
	})
}

func TestRotatorsConvergeOnOneSecret(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r1, r2 := newRotator(cs), newRotator(cs)
	start(t, r1)
	start(t, r2)
	waitReady(t, r1)
	waitReady(t, r2)
	eventually(t, func() string {
		secret := getSecret(t, cs)
		want := leafOf(t, secret.Data)
		if !served(t, r1).Equal(want) || !served(t, r2).Equal(want) {
			return "the replicas do not both serve the certificate in the Secret"
		}
		return allBundlesEqual(t, cs, secret.Data["ca.crt"], 2)
	})
}

func TestStartRotatesWhenClockAdvances(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	cs := newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r := newRotator(cs)
	r.Now = clock.Now
	start(t, r)
	waitReady(t, r)
	first := served(t, r)
	caBundle := getSecret(t, cs).Data["ca.crt"]
	ca := parseCertsPEM(caBundle)[0]

	// Past the serving certificate's renewal point, but not the CA's.
	clock.Set(clock.Now().Add(200 * day))
	eventually(t, func() string {
		if served(t, r).Equal(first) {
			return "serving certificate not rotated"
		}
		return ""
	})
	second := served(t, r)
	if err := second.CheckSignatureFrom(ca); err != nil {
		t.Errorf("renewed serving certificate not signed by the unchanged CA: %v", err)
	}
	if msg := allBundlesEqual(t, cs, caBundle, 2); msg != "" {
		t.Errorf("CA bundle changed on a serving certificate renewal: %s", msg)
	}

	// Past the CA's renewal point, while second is still valid.
	clock.Set(clock.Now().Add(50 * day))
	eventually(t, func() string {
		leaf := served(t, r)
		if leaf.CheckSignatureFrom(ca) == nil {
			return "still serving a certificate from the old CA"
		}
		bundle := caBundles(t, cs)["mutating/a"]
		if err := verify(leaf, bundle, testDNS, clock.Now()); err != nil {
			return "served certificate does not verify against the injected bundle: " + err.Error()
		}
		if got := parseCertsPEM(bundle); len(got) != 2 || !got[1].Equal(ca) {
			return fmt.Sprintf("injected bundle holds %d CAs, want the new and the old one", len(got))
		}
		return allBundlesEqual(t, cs, getSecret(t, cs).Data["ca.crt"], 2)
	})
	// A replica that still serves the previous certificate stays trusted.
	if err := verify(second, caBundles(t, cs)["validating/b"], testDNS, clock.Now()); err != nil {
		t.Errorf("previous serving certificate does not verify against the rotation bundle: %v", err)
	}
}

func TestRotatorsConvergeAfterRenewal(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	cs := newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r1, r2 := newRotator(cs), newRotator(cs)
	r1.Now, r2.Now = clock.Now, clock.Now
	r2.CheckInterval = time.Hour // r2 mostly learns of the rotation from watch events
	start(t, r1)
	start(t, r2)
	waitReady(t, r1)
	waitReady(t, r2)
	first := served(t, r1)

	clock.Set(clock.Now().Add(250 * day)) // both the CA and the serving certificate are due
	eventually(t, func() string {
		secret := getSecret(t, cs)
		want := leafOf(t, secret.Data)
		if want.Equal(first) {
			return "Secret not rotated"
		}
		if !served(t, r1).Equal(want) || !served(t, r2).Equal(want) {
			return "the replicas do not both serve the rotated certificate"
		}
		return allBundlesEqual(t, cs, secret.Data["ca.crt"], 2)
	})
}

// TestStartPicksUpSecretRotatedElsewhere rotates the Secret behind the
// rotators' backs, as another replica would: both must serve the new
// certificate and inject the new bundle, learning of it only from the
// Secret watch.
func TestStartPicksUpSecretRotatedElsewhere(t *testing.T) {
	cs := newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b"))
	r1, r2 := newRotator(cs), newRotator(cs)
	r1.CheckInterval, r2.CheckInterval = time.Hour, time.Hour
	start(t, r1)
	start(t, r2)
	waitReady(t, r1)
	waitReady(t, r2)
	quiesce(t, cs)

	secret := getSecret(t, cs)
	// A valid Secret with a different CA, like the result of a CA rotation
	// by a replica with a clock slightly ahead.
	other := mustPlan(t, nil, testPolicy(), time.Now())
	secret.Data = other.data
	if _, err := cs.CoreV1().Secrets(testNamespace).Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		want := other.mat.serving.Leaf
		if !served(t, r1).Equal(want) || !served(t, r2).Equal(want) {
			return "the replicas do not both serve the certificate rotated elsewhere"
		}
		return allBundlesEqual(t, cs, other.data["ca.crt"], 2)
	})
}

// TestEnsureSecretAdoptsConcurrentRotation makes another "replica" rotate
// the Secret between this rotator's read and its update: the update must
// fail with a conflict and the other replica's certificate be adopted
// without a second write.
func TestEnsureSecretAdoptsConcurrentRotation(t *testing.T) {
	initial := mustPlan(t, nil, testPolicy(), t0)
	cs := newClient(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret, ResourceVersion: "1"},
		Type:       corev1.SecretTypeTLS,
		Data:       initial.data,
	})
	now := t0.Add(61 * day)
	other := mustPlan(t, initial.data, testPolicy(), now)
	var updates atomic.Int32
	cs.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) > 1 {
			return false, nil, nil
		}
		rotated := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret, ResourceVersion: "other"},
			Type:       corev1.SecretTypeTLS,
			Data:       other.data,
		}
		if err := cs.Tracker().Update(secretsGVR, rotated, testNamespace); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(secretsGVR.GroupResource(), testSecret, errors.New("changed meanwhile"))
	})

	expectAdopted(t, cs, now, other.mat.serving.Leaf, "the concurrently rotated certificate")
	if n := updates.Load(); n != 1 {
		t.Errorf("%d updates, want 1 (the one that lost the race)", n)
	}
}

// TestEnsureSecretAdoptsConcurrentCreate makes another "replica" create the
// Secret between this rotator's read and its create: the create must fail
// with AlreadyExists and the other replica's certificate be adopted.
func TestEnsureSecretAdoptsConcurrentCreate(t *testing.T) {
	cs := newClient()
	other := mustPlan(t, nil, testPolicy(), t0)
	var creates atomic.Int32
	cs.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) > 1 {
			return false, nil, nil
		}
		winner := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testSecret, ResourceVersion: "other"},
			Type:       corev1.SecretTypeTLS,
			Data:       other.data,
		}
		if err := cs.Tracker().Add(winner); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewAlreadyExists(secretsGVR.GroupResource(), testSecret)
	})

	expectAdopted(t, cs, t0, other.mat.serving.Leaf, "the concurrently created certificate")
	if n := creates.Load(); n != 1 {
		t.Errorf("%d creates, want 1 (the one that lost the race)", n)
	}
}

func TestStartTwice(t *testing.T) {
	r := newRotator(newClient(mutatingConfig(testMutating, "a"), validatingConfig(testValidating, "b")))
	start(t, r)
	waitReady(t, r)
	if err := r.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("second Start = %v, want an error", err)
	}
}

// expectAdopted runs ensureSecret once at now and checks that it serves the
// other replica's certificate want.
func expectAdopted(t *testing.T, cs *fake.Clientset, now time.Time, want *x509.Certificate, what string) {
	t.Helper()
	r := newRotator(cs)
	r.Now = func() time.Time { return now }
	cfg, err := r.validate()
	if err != nil {
		t.Fatal(err)
	}
	r.cfg = cfg
	mat, err := r.ensureSecret(log.IntoContext(context.Background(), testr.New(t)))
	if err != nil {
		t.Fatalf("ensureSecret: %v", err)
	}
	if !mat.serving.Leaf.Equal(want) {
		t.Errorf("%s was not adopted", what)
	}
}
