package kubeletapi

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// The kubelet API authenticates and authorizes as a kubelet does with
// webhook authentication and authorization: a client certificate signed by
// the cluster's client CA (the API server's own, for kubectl logs and exec)
// or a bearer token checked with a TokenReview, then a SubjectAccessReview of
// the node subresource the request reaches. This is the subset of
// k8s.io/apiserver's delegating authenticator and authorizer the API needs,
// on plain client-go calls: linking that stack cost the virtual kubelet
// about a third of its binary and of its resident file pages.

// Where the cluster publishes its client CA, as for extension API servers.
const (
	clientCANamespace = "kube-system"
	clientCAConfigMap = "extension-apiserver-authentication"
	clientCAKey       = "client-ca-file"
)

// Cache lifetimes and sizes of review answers: a token's identity for 2
// minutes (authenticated or not), an allowed decision for 5 minutes and a
// denied one for 30 seconds, as the delegating authenticator and authorizer
// were configured before.
const (
	tokenCacheTTL = 2 * time.Minute
	allowCacheTTL = 5 * time.Minute
	denyCacheTTL  = 30 * time.Second
	reviewTimeout = 10 * time.Second
	cacheSize     = 4096
)

// Groups every authenticated user belongs to.
const groupAuthenticated = "system:authenticated"

// websocketBearerPrefix carries a bearer token in a WebSocket subprotocol,
// for clients that cannot set headers.
const websocketBearerPrefix = "base64url.bearer.authorization.k8s.io."

// userInfo is who a request is from.
type userInfo struct {
	Name, UID string
	Groups    []string
	Extra     map[string]authorizationv1.ExtraValue
}

// attributes is what a request does, as a SubjectAccessReview asks it.
type attributes struct {
	Verb, APIVersion, Resource, Subresource, Name, Path string
	ResourceRequest                                     bool
}

// clientCA holds the cluster's client CA, kept current from its ConfigMap.
type clientCA struct {
	kube kubernetes.Interface
	pool atomic.Pointer[x509.CertPool]
}

// load replaces the pool with the ConfigMap's bundle (none when the
// ConfigMap is gone or holds none).
func (c *clientCA) load(cm *corev1.ConfigMap) error {
	if cm == nil || cm.Data[clientCAKey] == "" {
		c.pool.Store(nil)
		return fmt.Errorf("ConfigMap %s/%s has no %s", clientCANamespace, clientCAConfigMap, clientCAKey)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[clientCAKey])) {
		return fmt.Errorf("ConfigMap %s/%s: %s holds no PEM certificate", clientCANamespace, clientCAConfigMap, clientCAKey)
	}
	c.pool.Store(pool)
	return nil
}

// RunOnce reads the CA once.
func (c *clientCA) RunOnce(ctx context.Context) error {
	cm, err := c.kube.CoreV1().ConfigMaps(clientCANamespace).Get(ctx, clientCAConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read ConfigMap %s/%s: %w", clientCANamespace, clientCAConfigMap, err)
	}
	return c.load(cm)
}

// Run follows the ConfigMap until ctx is done.
func (c *clientCA) Run(ctx context.Context) {
	one := fields.OneTermEqualSelector("metadata.name", clientCAConfigMap).String()
	cms := c.kube.CoreV1().ConfigMaps(clientCANamespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = one
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = one
			return cms.Watch(ctx, o)
		},
	}
	set := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			_ = c.load(cm)
		}
	}
	_, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		// A fake clientset cannot stream its list as a watch (WatchList); a
		// cluster can, and does.
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, c.kube), ObjectType: &corev1.ConfigMap{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, obj any) { set(obj) },
			DeleteFunc: func(any) { _ = c.load(nil) },
		},
	})
	ctrl.RunWithContext(ctx)
}

// authenticator identifies a request's user.
type authenticator struct {
	ca      *clientCA
	reviews func(context.Context, *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error)
	backoff wait.Backoff
	tokens  *utilcache.LRUExpireCache // sha256 of a token -> tokenResult
}

type tokenResult struct {
	user *userInfo // nil: not authenticated
}

// authenticate returns the request's user; nil with a nil error when the
// request carries no credential. A client certificate is tried first, then
// a bearer token (header or WebSocket subprotocol); a failure of one does
// not stop the next.
func (a *authenticator) authenticate(r *http.Request) (*userInfo, error) {
	var errs []error
	if u, err := a.certificateUser(r); u != nil {
		return withAuthenticated(u), nil
	} else if err != nil {
		errs = append(errs, err)
	}
	for _, credential := range []func(*http.Request) (*userInfo, error){a.headerTokenUser, a.websocketTokenUser} {
		u, err := credential(r)
		if u != nil {
			return withAuthenticated(u), nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, errors.Join(errs...)
}

func withAuthenticated(u *userInfo) *userInfo {
	if !slices.Contains(u.Groups, groupAuthenticated) {
		u.Groups = append(slices.Clip(u.Groups), groupAuthenticated)
	}
	return u
}

// certificateUser verifies the client certificate against the client CA:
// its common name is the user, its organizations the groups.
func (a *authenticator) certificateUser(r *http.Request) (*userInfo, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, nil
	}
	pool := a.ca.pool.Load()
	if pool == nil {
		return nil, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if len(r.TLS.PeerCertificates) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(opts); err != nil {
		return nil, fmt.Errorf("verifying certificate SN=%s, SKID=%x, AKID=%x failed: %w", leaf.SerialNumber, leaf.SubjectKeyId, leaf.AuthorityKeyId, err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, nil
	}
	return &userInfo{Name: leaf.Subject.CommonName, Groups: slices.Clone(leaf.Subject.Organization)}, nil
}

// headerTokenUser authenticates the Authorization header's bearer token and
// removes the header once it did.
func (a *authenticator) headerTokenUser(r *http.Request) (*userInfo, error) {
	scheme, token, found := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return nil, nil
	}
	if token = strings.TrimSpace(token); token == "" {
		return nil, nil
	}
	u, err := a.tokenUser(r.Context(), token)
	if u == nil && err == nil {
		err = errors.New("invalid bearer token")
	}
	if u != nil {
		r.Header.Del("Authorization")
	}
	return u, err
}

// websocketTokenUser authenticates a token passed as the WebSocket
// subprotocol base64url.bearer.authorization.k8s.io.<token>, which it
// removes once it did (another subprotocol must remain to echo back).
func (a *authenticator) websocketTokenUser(r *http.Request) (*userInfo, error) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return nil, nil
	}
	var token string
	var others []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			p = strings.TrimSpace(p)
			encoded, ok := strings.CutPrefix(p, websocketBearerPrefix)
			if !ok {
				others = append(others, p)
				continue
			}
			if token != "" {
				return nil, errors.New("multiple base64.bearer.authorization tokens specified")
			}
			decoded, err := base64.RawURLEncoding.DecodeString(encoded)
			if err != nil || !utf8.Valid(decoded) || len(decoded) == 0 {
				return nil, errors.New("invalid base64.bearer.authorization token")
			}
			token = string(decoded)
		}
	}
	if token == "" {
		return nil, nil
	}
	if len(others) == 0 {
		return nil, errors.New("missing additional subprotocol")
	}
	u, err := a.tokenUser(r.Context(), token)
	if u == nil && err == nil {
		err = errors.New("invalid bearer token")
	}
	if u != nil {
		r.Header.Set("Sec-WebSocket-Protocol", strings.Join(others, ","))
	}
	return u, err
}

// tokenUser asks a TokenReview who a token is, remembering the answer.
func (a *authenticator) tokenUser(ctx context.Context, token string) (*userInfo, error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := a.tokens.Get(key); ok {
		return copyUser(v.(tokenResult).user), nil
	}
	var review *authenticationv1.TokenReview
	err := retry.OnError(a.backoff, retriable, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		var err error
		review, err = a.reviews(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	if review.Status.Error != "" {
		return nil, fmt.Errorf("TokenReview: %s", review.Status.Error)
	}
	var u *userInfo
	if review.Status.Authenticated {
		ru := review.Status.User
		u = &userInfo{Name: ru.Username, UID: ru.UID, Groups: ru.Groups}
		if len(ru.Extra) > 0 {
			u.Extra = make(map[string]authorizationv1.ExtraValue, len(ru.Extra))
			for k, v := range ru.Extra {
				u.Extra[k] = authorizationv1.ExtraValue(v)
			}
		}
	}
	a.tokens.Add(key, tokenResult{user: u}, tokenCacheTTL)
	return copyUser(u), nil
}

// copyUser keeps the cached user from the groups withAuthenticated adds.
func copyUser(u *userInfo) *userInfo {
	if u == nil {
		return nil
	}
	c := *u
	c.Groups = slices.Clone(u.Groups)
	return &c
}

// authorizer decides with SubjectAccessReviews, remembering the answers.
type authorizer struct {
	reviews   func(context.Context, *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error)
	backoff   wait.Backoff
	decisions *utilcache.LRUExpireCache // JSON of the review's spec -> authorizationv1.SubjectAccessReviewStatus
}

// authorize says whether u may do attrs, and why not.
func (z *authorizer) authorize(ctx context.Context, u *userInfo, attrs attributes) (allowed bool, reason string, err error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: attrs.Verb, Version: attrs.APIVersion,
			Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name},
	}
	if !attrs.ResourceRequest {
		spec.ResourceAttributes = nil
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	key := string(raw)
	if v, ok := z.decisions.Get(key); ok {
		st := v.(authorizationv1.SubjectAccessReviewStatus)
		return st.Allowed && !st.Denied, st.Reason, nil
	}
	var review *authorizationv1.SubjectAccessReview
	err = retry.OnError(z.backoff, retriable, func() error {
		ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
		defer cancel()
		var err error
		review, err = z.reviews(ctx, &authorizationv1.SubjectAccessReview{Spec: spec})
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	st := review.Status
	if st.Allowed && st.Denied {
		return false, st.Reason, errors.New("SubjectAccessReview returned both allow and deny")
	}
	ttl := denyCacheTTL
	if st.Allowed {
		ttl = allowCacheTTL
	}
	z.decisions.Add(key, st, ttl)
	return st.Allowed, st.Reason, nil
}

// retriable tells transient failures of a review, worth another try, as
// k8s.io/apiserver's webhooks do.
func retriable(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) || apierrors.IsInternalError(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, delay := apierrors.SuggestsClientDelay(err)
	return delay
}

// newAuth builds the authenticator and authorizer on the local cluster.
func newAuth(local kubernetes.Interface, backoff wait.Backoff) (*clientCA, *authenticator, *authorizer) {
	ca := &clientCA{kube: local}
	authn := &authenticator{ca: ca, backoff: backoff, tokens: utilcache.NewLRUExpireCache(cacheSize),
		reviews: func(ctx context.Context, r *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
			return local.AuthenticationV1().TokenReviews().Create(ctx, r, metav1.CreateOptions{})
		}}
	authz := &authorizer{backoff: backoff, decisions: utilcache.NewLRUExpireCache(cacheSize),
		reviews: func(ctx context.Context, r *authorizationv1.SubjectAccessReview) (*authorizationv1.SubjectAccessReview, error) {
			return local.AuthorizationV1().SubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		}}
	return ca, authn, authz
}
