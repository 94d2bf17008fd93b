// Package controllermanager assembles ferry's controllers into one
// controller-runtime manager: the library behind ferry-controller-manager,
// also run in-process by the end-to-end tests.
package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ferry-io/ferry/api/grant"
	ferryscheme "github.com/ferry-io/ferry/api/scheme"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	fabricctrl "github.com/ferry-io/ferry/controllers/fabric"
	"github.com/ferry-io/ferry/controllers/fencing"
	"github.com/ferry-io/ferry/controllers/kubeletcerts"
	"github.com/ferry-io/ferry/controllers/nodetopology"
	"github.com/ferry-io/ferry/controllers/offloading"
	"github.com/ferry-io/ferry/controllers/peering"
	"github.com/ferry-io/ferry/controllers/peeringquota"
	"github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/storage/move"
)

// Options configure ferry's controllers in one cluster.
type Options struct {
	// ClusterID of this cluster, recorded at the first start.
	ClusterID ferryv1alpha1.ClusterID
	// SharingPercentage of free resources granted to each consumer (1-100).
	SharingPercentage int
	// GrantDebounce delays re-granting after node and pod changes.
	GrantDebounce time.Duration
	// FencingTick is how often the Lease renewer looks for new providers
	// (1 s when zero).
	FencingTick time.Duration
	// ClusterLabels are suggested to consumers for the virtual node standing
	// for this cluster, besides the region and zone its nodes share.
	ClusterLabels map[string]string
	// Launcher runs the virtual kubelets of this cluster's virtual nodes.
	Launcher peering.VirtualKubeletLauncher
	// MetricsAddr serves Prometheus metrics ("0" disables).
	MetricsAddr string
	// MetricsSecure serves them over HTTPS to authenticated and authorized
	// clients only (TokenReview, SubjectAccessReview on GET /metrics).
	MetricsSecure bool
	// HealthAddr serves /healthz and /readyz ("0" disables).
	HealthAddr string
	// Now is the clock deciding credential renewals (time.Now when nil);
	// tests move it forward.
	Now func() time.Time
	// LeaderElection makes replicas elect one active manager through a Lease
	// in ferry-system.
	LeaderElection bool
	// ShadowPodWorkers is how many ShadowPods are reconciled at once
	// (offloading.DefaultShadowPodWorkers when 0).
	ShadowPodWorkers int
	// StorageNamespace holds the real claims the storage fabric makes for
	// claims of the virtual class bound on real nodes
	// (storage.DefaultNamespace when empty).
	StorageNamespace string
	// DisableStorage leaves the virtual storage class unserved (claims of it
	// then never bind: do not install manifests/storage).
	DisableStorage bool
	// VolumeMoverImage is ferry-volume-mover's image, run by VolumeMoves
	// (no VolumeMove controller when empty); VolumeMoverPullPolicy its pull
	// policy.
	VolumeMoverImage      string
	VolumeMoverPullPolicy corev1.PullPolicy
	// DisableNodeTopology leaves this cluster's real nodes without the
	// topology.ferry.io/cluster label (topologySpreadConstraints on it then
	// leave them out).
	DisableNodeTopology bool
	// Network configures the network fabric's control plane (discovery,
	// NetworkConfig exchange, IPAM).
	Network fabricctrl.Options
	// SeveralPerProcess allows more than one manager in a process (tests
	// run one per test cluster); controller metrics then share names.
	SeveralPerProcess bool
}

// Validate reports the first bad option, naming its flag.
func (o Options) Validate() error {
	if err := ferryv1alpha1.ValidateClusterID("--cluster-id", string(o.ClusterID)); err != nil {
		return err
	}
	if _, err := grant.Share(nil, o.SharingPercentage); err != nil {
		return fmt.Errorf("--sharing-percentage: %w", err)
	}
	if o.GrantDebounce < 0 {
		return fmt.Errorf("--grant-debounce %s: must not be negative", o.GrantDebounce)
	}
	for k, v := range o.ClusterLabels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("--cluster-labels: key %q: %s", k, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("--cluster-labels: %s=%q: %s", k, v, errs[0])
		}
	}
	if o.ShadowPodWorkers < 0 {
		return fmt.Errorf("--shadow-pod-workers %d: must not be negative", o.ShadowPodWorkers)
	}
	if err := o.Network.Validate(); err != nil {
		return err
	}
	if o.Launcher == nil {
		return fmt.Errorf("no virtual kubelet launcher")
	}
	return nil
}

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=ferry-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// New records the cluster's identity and returns a manager running the
// peering and offloading controllers (provider and consumer sides: a cluster
// can be both).
func New(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	if err := peering.EnsureClusterIdentity(ctx, direct, opts.ClusterID); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  ferryscheme.Scheme(),
		Cache:                   cacheOptions(),
		Metrics:                 metricsOptions(opts.MetricsAddr, opts.MetricsSecure),
		HealthProbeBindAddress:  opts.HealthAddr,
		Controller:              config.Controller{SkipNameValidation: ptr.To(opts.SeveralPerProcess)},
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "ferry-controller-manager",
		LeaderElectionNamespace: ferryv1alpha1.SystemNamespace,
		// Step down at once on SIGTERM, so a rollout does not wait a lease out.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("build manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add readiness check: %w", err)
	}
	if err := (&peering.TenantReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up tenant controller: %w", err)
	}
	if err := (&peering.GrantReconciler{Client: mgr.GetClient(), SharingPercentage: opts.SharingPercentage, Debounce: opts.GrantDebounce, Labels: opts.ClusterLabels}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up grant controller: %w", err)
	}
	// One set of clients per provider, shared by the consumer-side controllers.
	providers := peering.NewProviderClients(mgr.GetClient(), 20, 40)
	if err := (&peering.PeerReconciler{Client: mgr.GetClient(), ClusterID: opts.ClusterID, Launcher: opts.Launcher, Providers: providers, Now: opts.Now}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up peer controller: %w", err)
	}
	if err := (&offloading.TwinNamespaceReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up twin namespace controller: %w", err)
	}
	fences := fencing.NewFences(mgr.GetClient())
	if err := (&fencing.Fencer{Client: mgr.GetClient(), Fences: fences, Recorder: mgr.GetEventRecorder("ferry-fencer")}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up fencer: %w", err)
	}
	if err := mgr.Add(&fencing.Renewer{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterID: opts.ClusterID, Providers: providers, Tick: opts.FencingTick, Recorder: mgr.GetEventRecorder("ferry-failover")}); err != nil {
		return nil, fmt.Errorf("set up lease renewer: %w", err)
	}
	if err := (&offloading.ShadowPodReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("ferry-shadow-pods"), Workers: opts.ShadowPodWorkers, Fences: fences}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up shadow pod controller: %w", err)
	}
	if err := (&offloading.NamespaceOffloadingReconciler{Client: mgr.GetClient(), ClusterID: opts.ClusterID, Providers: providers}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up namespace offloading controller: %w", err)
	}
	if err := (&peeringquota.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Now: opts.Now}).SetupWithManager(ctx, mgr); err != nil {
		return nil, fmt.Errorf("set up peering quota controller: %w", err)
	}
	if err := (&kubeletcerts.Approver{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up kubelet serving certificate approver: %w", err)
	}
	if !opts.DisableNodeTopology {
		if err := (&nodetopology.Reconciler{Client: mgr.GetClient(), ClusterID: opts.ClusterID}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up node topology controller: %w", err)
		}
	}
	if !opts.Network.Disabled {
		if err := (&fabricctrl.IPAMReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterID: opts.ClusterID,
			Options: opts.Network, TenantNamespace: peering.TenantNamespaceOf}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up IPAM: %w", err)
		}
	}
	if err := (&fabricctrl.ExchangeReconciler{Client: mgr.GetClient(), ClusterID: opts.ClusterID, Disabled: opts.Network.Disabled,
		Providers: fabricProviders{providers}, TenantNamespace: peering.TenantNamespaceOf}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up network exchange: %w", err)
	}
	if !opts.DisableStorage {
		ns := opts.StorageNamespace
		if ns == "" {
			ns = storage.DefaultNamespace
		}
		// Its own clients and rate limit per provider: a burst of claims
		// (a StatefulSet scaling out) must not wait behind, nor starve, the
		// peering's health checks and twin namespace requests.
		storageClients := peering.NewProviderClients(mgr.GetClient(), 100, 200)
		if err := storage.Setup(mgr, storage.Options{ClusterID: opts.ClusterID, Namespace: ns, Providers: storageProviders{storageClients, peering.NewWatchClients()}}); err != nil {
			return nil, fmt.Errorf("set up storage fabric: %w", err)
		}
		if opts.VolumeMoverImage != "" {
			if err := move.Setup(mgr, moveClusters{storageClients}, move.Options{ClusterID: opts.ClusterID, Namespace: ns,
				Image: opts.VolumeMoverImage, PullPolicy: opts.VolumeMoverPullPolicy, NetworkDisabled: opts.Network.Disabled}); err != nil {
				return nil, fmt.Errorf("set up volume moves: %w", err)
			}
		}
	}
	return mgr, nil
}

// fabricProviders hands the network fabric the peering's provider clients.
type fabricProviders struct{ clients *peering.ProviderClients }

func (f fabricProviders) For(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) (client.Client, string, error) {
	p, err := f.clients.For(ctx, fc)
	if err != nil {
		return nil, "", err
	}
	return p.Client, p.TenantNamespace, nil
}

// storageProviders hands the storage fabric the peering's provider clients.
type storageProviders struct {
	clients *peering.ProviderClients
	watches *peering.WatchClients
}

func (s storageProviders) Client(ctx context.Context, id ferryv1alpha1.ClusterID) (client.Client, error) {
	p, err := s.clients.ForCluster(ctx, id)
	if errors.Is(err, peering.ErrNotPeered) {
		return nil, fmt.Errorf("provider %s: %w", id, storage.ErrNotPeered)
	} else if err != nil {
		return nil, err
	}
	return p.Client, nil
}

// WatchClient hands the storage fabric a client of provider id that
// watches (its provider claims' informers), the same one until the
// provider's credential changes.
func (s storageProviders) WatchClient(ctx context.Context, id ferryv1alpha1.ClusterID) (client.WithWatch, error) {
	p, err := s.clients.ForCluster(ctx, id)
	if errors.Is(err, peering.ErrNotPeered) {
		return nil, fmt.Errorf("provider %s: %w", id, storage.ErrNotPeered)
	} else if err != nil {
		return nil, err
	}
	return s.watches.For(p)
}

// moveClusters hands the volume moves the peering's provider clients.
type moveClusters struct{ clients *peering.ProviderClients }

func (m moveClusters) Provider(ctx context.Context, id ferryv1alpha1.ClusterID) (*move.Cluster, error) {
	p, err := m.clients.ForCluster(ctx, id)
	if errors.Is(err, peering.ErrNotPeered) {
		return nil, fmt.Errorf("provider %s: %w", id, storage.ErrNotPeered)
	} else if err != nil {
		return nil, err
	}
	return &move.Cluster{Client: p.Client, Kube: p.Kube}, nil
}

// Authenticating and authorizing metrics clients:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serves metrics at addr; secure, over HTTPS (a self-signed
// certificate) to clients the API server authenticates and authorizes for
// GET /metrics.
// consumerLeases selects the Leases the Fencer follows.
var consumerLeases = func() labels.Selector {
	req, err := labels.NewRequirement(ferryv1alpha1.LabelOriginCluster, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

func metricsOptions(addr string, secure bool) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: addr}
	}
	return metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// cacheOptions are the manager's cache's.
func cacheOptions() cache.Options {
	return cache.Options{
		// No controller reads managed fields, and they are about a third of
		// a pod in memory: a provider's manager caches every pod of its
		// cluster (grants) and every ShadowPod, 0.9 GB at 10,000 offloaded
		// pods. An update built from a cached object without them leaves the
		// server's as they are (omitted, not emptied).
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// Credentials live in ferry-system: cache (and be allowed to
			// read) no other Secrets.
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{ferryv1alpha1.SystemNamespace: {}}},
			// Only consumers' Leases (labelled by the Fencer), not every
			// node's heartbeat.
			&coordinationv1.Lease{}: {Label: consumerLeases},
		},
	}
}
