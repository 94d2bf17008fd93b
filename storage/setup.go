package storage

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// DefaultNamespace holds the real claims made for claims of the virtual
// class bound on this cluster's real nodes.
const DefaultNamespace = "ferry-storage"

// Validate reports the first bad option, naming its flag.
func (o Options) Validate() error {
	if o.Namespace == "" {
		return fmt.Errorf("--storage-namespace: must not be empty")
	}
	if o.Providers == nil {
		return fmt.Errorf("no provider clients")
	}
	if o.BindWait < 0 || o.Workers < 0 {
		return fmt.Errorf("storage: bind wait and workers must not be negative")
	}
	return nil
}

// newProvisionControllerMu serializes NewProvisionController.
var newProvisionControllerMu sync.Mutex

// NewProvisionController is sig-storage-lib-external-provisioner's
// constructor, serialized: each call registers core/v1 into client-go's
// global scheme, and two provisioners started at once in one process (the
// test bed runs several clusters, each with provisioners, in one) would
// write that map concurrently. Every provisioner in the process must be
// built through it.
func NewProvisionController(ctx context.Context, kube kubernetes.Interface, name string, p controller.Provisioner, options ...func(*controller.ProvisionController) error) *controller.ProvisionController {
	newProvisionControllerMu.Lock()
	defer newProvisionControllerMu.Unlock()
	return controller.NewProvisionController(ctx, kube, name, p, options...)
}

// Setup adds the storage fabric to mgr: the provisioner of the virtual
// class (sig-storage-lib-external-provisioner's controller, run by the
// elected leader only), the controllers of remote volumes and of the
// expansion of volumes held by real claims, and the collectors of the real
// and provider claims nothing will use.
func Setup(mgr ctrl.Manager, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Workers == 0 {
		opts.Workers = 16
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("storage: build clientset: %w", err)
	}
	recorder := mgr.GetEventRecorder("ferry-storage")
	prov := NewProvisioner(mgr.GetClient(), recorder, opts)
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		pc := NewProvisionController(ctx, kube, ferryv1alpha1.ProvisionerVirtual, prov,
			// The manager elects the leader; this runnable runs only there.
			controller.LeaderElection(false),
			controller.Threadiness(opts.Workers),
			// Retry for as long as it takes: an unreachable provider or a
			// twin namespace not Ready yet comes back.
			controller.FailedProvisionThreshold(0),
			controller.FailedDeleteThreshold(0),
			// The library's default backs off from 15 s: a claim waiting
			// for its real volume would wait that long at every step.
			controller.RateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](250*time.Millisecond, 2*time.Minute)),
			// Deleting a volume waits for the claim behind it to go.
			controller.AddFinalizer(true),
		)
		pc.Run(ctx)
		return nil
	}))
	if err != nil {
		return fmt.Errorf("storage: add provisioner: %w", err)
	}
	if err := (&RealClaimCollector{Client: mgr.GetClient(), Namespace: opts.Namespace}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("storage: set up real claim collector: %w", err)
	}
	if err := registerClaimsCollector(&ClaimsCollector{Reader: mgr.GetClient()}); err != nil {
		return fmt.Errorf("storage: register metrics: %w", err)
	}
	if err := (&RealVolumeExpander{Client: mgr.GetClient(), Namespace: opts.Namespace, Recorder: recorder}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("storage: set up real volume expansion: %w", err)
	}
	if err := mgr.Add(&RemoteClaimCollector{Client: mgr.GetClient(), Providers: opts.Providers, ClusterID: opts.ClusterID}); err != nil {
		return fmt.Errorf("storage: add provider claim collector: %w", err)
	}
	volumes := &RemoteVolumeReconciler{Client: mgr.GetClient(), Providers: opts.Providers, Recorder: recorder}
	if watching, ok := opts.Providers.(WatchingProviders); ok {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.PersistentVolume{}, indexRemoteClaim, remoteClaimIndex); err != nil {
			return fmt.Errorf("storage: index volumes by provider claim: %w", err)
		}
		volumes.Watcher = NewRemoteClaimWatcher(mgr.GetClient(), watching, opts.ClusterID)
		if err := mgr.Add(volumes.Watcher); err != nil {
			return fmt.Errorf("storage: add provider claim watcher: %w", err)
		}
	}
	return volumes.SetupWithManager(mgr)
}
