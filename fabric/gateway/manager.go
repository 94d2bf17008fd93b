package gateway

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Options configure ferry-gateway and the route agent.
type Options struct {
	// ClusterID of this cluster.
	ClusterID ferryv1alpha1.ClusterID
	// MetricsAddr and HealthAddr serve metrics and probes ("0" disables).
	MetricsAddr, HealthAddr string
	// MetricsSecure serves metrics over HTTPS to authenticated and
	// authorized clients only.
	MetricsSecure bool
}

// scheme holds what the gateway and route agent read.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = ferryv1alpha1.AddToScheme(s)
	return s
}

// newManager builds a manager whose cache holds NetworkConfigs (all
// namespaces: a consumer's sits in its tenant namespace) and, when gateway
// is set, ferry-system's Secrets and Services.
func newManager(cfg *rest.Config, o Options, gateway bool) (manager.Manager, error) {
	if o.ClusterID == "" {
		return nil, fmt.Errorf("--cluster-id is required")
	}
	byObject := map[client.Object]cache.ByObject{
		&ferryv1alpha1.NetworkConfig{}: {},
	}
	if gateway {
		system := map[string]cache.Config{ferryv1alpha1.SystemNamespace: {LabelSelector: labels.Everything()}}
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: system}
		byObject[&corev1.Service{}] = cache.ByObject{Namespaces: system}
	}
	return ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme(),
		Cache:                  cache.Options{ByObject: byObject},
		Metrics:                metricsOptions(o.MetricsAddr, o.MetricsSecure),
		HealthProbeBindAddress: o.HealthAddr,
		// The data plane is per pod or node: no leader to elect.
		LeaderElection: false,
	})
}

// GatewayOptions configure ferry-gateway.
type GatewayOptions struct {
	Options
	Settings
	// Election makes replicas active/passive by a Lease.
	Election ElectionOptions
}

// NewGateway builds ferry-gateway's manager. When the manager stops, the
// gateway removes every link, route and rule it made.
func NewGateway(cfg *rest.Config, o GatewayOptions) (manager.Manager, error) {
	if (o.EndpointAddress == "" || o.EndpointPort == 0) && (o.EndpointService == nil || o.EndpointService.Service == "") {
		return nil, fmt.Errorf("--endpoint or --service is required: the address and UDP port peers reach this gateway at, or its Service to find them from")
	}
	if !o.PodAddress.IsValid() {
		return nil, fmt.Errorf("--pod-address is required: the gateway pod's IP, which nodes reach it at")
	}
	if err := o.Election.Validate(); err != nil {
		return nil, err
	}
	mgr, err := newManager(cfg, o.Options, true)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{Client: mgr.GetClient(), ClusterID: o.ClusterID, Settings: o.Settings, Health: &Health{}}
	if o.Election.Enabled {
		if r.Leader, err = addElection(mgr, cfg, o.Election, o.DataPlane); err != nil {
			return nil, err
		}
	} else {
		activeGauge.Set(1)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(teardownOnStop(o.DataPlane.Close, "gateway")); err != nil {
		return nil, err
	}
	return mgr, addChecks(mgr, r.Health)
}

// NewRouteAgent builds the route agent's manager. When it stops, the agent
// removes the node's overlay link and routes.
func NewRouteAgent(cfg *rest.Config, o Options, node *NodePlane) (manager.Manager, error) {
	mgr, err := newManager(cfg, o, false)
	if err != nil {
		return nil, err
	}
	r := &AgentReconciler{Client: mgr.GetClient(), ClusterID: o.ClusterID, Node: node, Health: &Health{}}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := mgr.Add(teardownOnStop(node.Close, "route agent")); err != nil {
		return nil, err
	}
	return mgr, addChecks(mgr, r.Health)
}

// ReadyzCheck is the name of the readiness check that fails while the last
// reconcile failed: /readyz/reconcile on --health-probe-bind-address.
const ReadyzCheck = "reconcile"

// addChecks serves /healthz (the process answers) and /readyz (the last
// reconcile succeeded).
func addChecks(mgr manager.Manager, h *Health) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck(ReadyzCheck, h.Check)
}

// teardownOnStop runs teardown once the manager is stopping.
func teardownOnStop(teardown func() error, what string) manager.RunnableFunc {
	return func(ctx context.Context) error {
		<-ctx.Done()
		if err := teardown(); err != nil {
			log.FromContext(ctx).Error(err, "Cleaning up on exit", "component", what)
			return err
		}
		log.FromContext(ctx).Info("Removed every link, route and rule made", "component", what)
		return nil
	}
}

// startNow enqueues the single reconcile key at start.
func startNow() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(request)
		return nil
	})
}

// Authenticating and authorizing metrics clients:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves metrics at addr; secure, over HTTPS (a self-signed
// certificate) to clients the API server authenticates and authorizes for
// GET /metrics.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}
