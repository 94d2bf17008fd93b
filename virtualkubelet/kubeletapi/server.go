package kubeletapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	vkapi "github.com/virtual-kubelet/virtual-kubelet/node/api"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Defaults of Config's zero fields.
const (
	DefaultStreamIdleTimeout     = 4 * time.Hour // the kubelet's
	DefaultStreamCreationTimeout = 30 * time.Second
)

// Config says which node's API to serve and how.
type Config struct {
	// NodeName is the virtual node.
	NodeName string
	// ProviderClusterID is the provider its pods run in.
	ProviderClusterID ferryv1alpha1.ClusterID
	// Local is the consumer cluster; Provider the provider, with the
	// consumer's credential there.
	Local, Provider *rest.Config
	// Listener is where to serve (the node's kubelet endpoint).
	Listener net.Listener
	// Certificate returns the serving certificate (nil while there is none).
	Certificate func() *tls.Certificate
	// StreamIdleTimeout closes exec, attach and port-forward sessions idle
	// this long (default 4h); StreamCreationTimeout bounds their setup
	// (default 30s).
	StreamIdleTimeout, StreamCreationTimeout time.Duration
	// Metrics, when set, serves the virtual kubelet's own Prometheus
	// metrics at /metrics (authorized as nodes/metrics, like a kubelet's).
	Metrics http.Handler
}

// Server is the kubelet API of one virtual node.
type Server struct {
	cfg       Config
	started   time.Time
	local     kubernetes.Interface
	remote    kubernetes.Interface
	remoteCfg *rest.Config
	metrics   metricsclient.Interface
	resolver  *resolver
	cpu       cpuCounters

	clientCA *clientCA
	authn    *authenticator
	authz    *authorizer
}

// authWebhookBackoff retries TokenReviews and SubjectAccessReviews as an
// aggregated API server does.
var authWebhookBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// New builds the server; Run serves it.
func New(cfg Config) (*Server, error) {
	if cfg.StreamIdleTimeout == 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if cfg.StreamCreationTimeout == 0 {
		cfg.StreamCreationTimeout = DefaultStreamCreationTimeout
	}
	if cfg.Listener == nil || cfg.Certificate == nil {
		return nil, errors.New("kubelet API: a listener and a certificate source are required")
	}
	local, err := kubernetes.NewForConfig(cfg.Local)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: client of the local cluster: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := ferryv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("kubelet API: %w", err)
	}
	localCRs, err := client.New(cfg.Local, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubelet API: client of the local cluster: %w", err)
	}
	remoteCfg := rest.CopyConfig(cfg.Provider)
	remote, err := kubernetes.NewForConfig(remoteCfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: client of provider %s: %w", cfg.ProviderClusterID, err)
	}
	metrics, err := metricsclient.NewForConfig(remoteCfg)
	if err != nil {
		return nil, fmt.Errorf("kubelet API: metrics client of provider %s: %w", cfg.ProviderClusterID, err)
	}
	clientCA, authn, authz := newAuth(local, authWebhookBackoff)
	return &Server{
		cfg: cfg, started: time.Now(), local: local, remote: remote, remoteCfg: remoteCfg, metrics: metrics,
		resolver: &resolver{nodeName: cfg.NodeName, provider: cfg.ProviderClusterID, local: local, localCRs: localCRs, remote: remote},
		clientCA: clientCA, authn: authn, authz: authz,
	}, nil
}

// Handler is the API's HTTP handler, authentication and authorization
// included.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	vkapi.AttachPodRoutes(vkapi.PodHandlerConfig{
		RunInContainer:        s.exec,
		AttachToContainer:     s.attach,
		PortForward:           s.portForward,
		GetContainerLogs:      s.logs,
		GetPods:               s.pods,
		GetPodsFromKubernetes: s.pods,
		GetStatsSummary:       s.summary,
		GetMetricsResource:    s.resourceMetrics,
		StreamIdleTimeout:     s.cfg.StreamIdleTimeout,
		StreamCreationTimeout: s.cfg.StreamCreationTimeout,
	}, mux, false)
	if s.cfg.Metrics != nil {
		mux.Handle("/metrics", s.cfg.Metrics)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return s.authorize(mux)
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("kubelet-api")
	if err := s.clientCA.RunOnce(ctx); err != nil {
		logger.Error(err, "Client CA not readable yet; client certificates fail until it is")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { s.clientCA.Run(ctx) })

	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return klog.NewContext(ctx, logger) },
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// Streams upgrade HTTP/1.1 connections (SPDY, WebSockets).
			NextProtos: []string{"http/1.1"},
			// The authenticator verifies the chain against the client CA,
			// which can change while serving.
			ClientAuth: tls.RequestClientCert,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				if c := s.cfg.Certificate(); c != nil {
					return c, nil
				}
				return nil, errors.New("no serving certificate yet")
			},
		},
	}
	wg.Go(func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	})
	logger.Info("Serving the kubelet API", "address", s.cfg.Listener.Addr().String())
	if err := srv.ServeTLS(s.cfg.Listener, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet API: %w", err)
	}
	return nil
}

// authorize lets a request through when its user may reach the node's
// subresource the path belongs to, as the kubelet decides.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		u, err := s.authn.authenticate(r)
		if u == nil {
			msg := "Unauthorized"
			if err != nil {
				msg = "Unauthorized: " + err.Error()
			}
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		attrs := requestAttributes(r, s.cfg.NodeName)
		allowed, reason, err := s.authz.authorize(r.Context(), u, attrs)
		if !allowed || err != nil {
			msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, attrs.Verb, attrs.Subresource)
			if reason != "" {
				msg += ": " + reason
			}
			if err != nil {
				msg += ": " + err.Error()
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requestAttributes maps a kubelet API request onto the node subresource
// the kubelet checks for it: stats, metrics, log, or proxy for the rest
// (containerLogs, exec, attach, portForward, pods).
func requestAttributes(r *http.Request, nodeName string) attributes {
	verb := "get"
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	sub := "proxy"
	switch p := r.URL.Path; {
	case p == "/stats" || strings.HasPrefix(p, "/stats/"):
		sub = "stats"
	case p == "/metrics" || strings.HasPrefix(p, "/metrics/"):
		sub = "metrics"
	case p == "/logs" || strings.HasPrefix(p, "/logs/"):
		sub = "log"
	}
	return attributes{Verb: verb, APIVersion: "v1", Resource: "nodes", Subresource: sub,
		Name: nodeName, ResourceRequest: true, Path: r.URL.Path}
}
