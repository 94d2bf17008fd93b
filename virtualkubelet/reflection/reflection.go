package reflection

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
)

// Config says what to reflect where.
type Config struct {
	// Local is the consumer cluster; Provider the provider, with the
	// consumer's credential.
	Local, Provider *rest.Config
	// NodeName is the virtual node standing for the provider.
	NodeName string
	// ConsumerClusterID and ProviderClusterID identify the two clusters.
	ConsumerClusterID, ProviderClusterID ferryv1alpha1.ClusterID
	// RemapIP translates local pod IPs into the addresses the provider
	// reaches them at (the network fabric's); identity when nil.
	RemapIP func(ip string) string
	// AddressesChanged signals that RemapIP now answers differently: every
	// EndpointSlice is reflected again.
	AddressesChanged <-chan struct{}
	// LocalPodCIDR is this cluster's pod range and where the provider sees
	// it (network.Translator.LocalPodCIDR), for NetworkPolicies' ipBlocks;
	// nil: one flat network.
	LocalPodCIDR func() (local, atProvider netip.Prefix, mapped bool)
	// Options tune the reflection.
	Options Options
	// RemoteScope says how the provider's copies are watched; auto (or
	// empty) asks the provider, for the kinds RemoteResources names. The
	// virtual kubelet resolves it once for the reflection and the pod
	// offloading together and passes the answer.
	RemoteScope remotescope.Scope
	// NodePods, when set, is the informer factory of the node's pods
	// (offloading.NodePodInformerFactory), shared with the pod offloading;
	// nil: one of its own.
	NodePods informers.SharedInformerFactory
	// Registry receives the reflection's metrics; nil: not exported.
	Registry prometheus.Registerer
}

// +kubebuilder:rbac:groups="",resources=configmaps;secrets;services;serviceaccounts;persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses;networkpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods;namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create
// +kubebuilder:rbac:groups="",resources=events,verbs=get;create;update;patch

// Run reflects until ctx is done. It returns an error when it cannot start.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Options.Validate(); err != nil {
		return err
	}
	opts := cfg.Options.WithDefaults()
	logger := klog.FromContext(ctx).WithName("reflection")
	ctx = klog.NewContext(ctx, logger)

	localCfg, remoteCfg := offloading.RateLimited(cfg.Local, opts.ClientQPS, opts.ClientBurst), offloading.RateLimited(cfg.Provider, opts.ClientQPS, opts.ClientBurst)
	local, err := kubernetes.NewForConfig(localCfg)
	if err != nil {
		return fmt.Errorf("build client of the local cluster: %w", err)
	}
	remote, err := kubernetes.NewForConfig(remoteCfg)
	if err != nil {
		return fmt.Errorf("build client of provider %s: %w", cfg.ProviderClusterID, err)
	}
	s, err := offloading.NewScheme()
	if err != nil {
		return fmt.Errorf("register API types: %w", err)
	}
	writer, err := client.New(remoteCfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("build client of provider %s: %w", cfg.ProviderClusterID, err)
	}
	localFerry, err := client.NewWithWatch(localCfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("build client of the local cluster: %w", err)
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return fmt.Errorf("register reflection metrics: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: local.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(s, corev1.EventSource{Component: "ferry-virtual-kubelet", Host: cfg.NodeName})

	env := &Env{
		Consumer: cfg.ConsumerClusterID, NodeName: cfg.NodeName, RemapIP: cfg.RemapIP,
		IngressClasses: opts.IngressClasses, StorageClasses: opts.StorageClasses,
	}
	ns := &namespaces{provider: cfg.ProviderClusterID}
	localFactory := informers.NewSharedInformerFactory(local, opts.ResyncPeriod)
	podFactory := cfg.NodePods
	if podFactory == nil {
		podFactory = offloading.NodePodInformerFactory(local, cfg.NodeName)
	}

	rs := &remoteSet{client: remote, selector: ferryv1alpha1.LabelOriginCluster + "=" + string(cfg.ConsumerClusterID), kinds: map[Kind]remoteKind{}}
	reflectors := map[Kind]*reflector{}
	var ev *eventReflector
	newReflector := func(kind Kind, t translator, inf cache.SharedIndexInformer) *reflector {
		r := &reflector{
			kind: kind, t: t, policy: opts.Policies[kind], workers: opts.Workers[kind], env: env,
			local: inf, remote: rs, ns: ns, writer: writer, recorder: recorder, metrics: m,
			queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
				workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "reflection-" + string(kind)}),
			recreateOnInvalid: kind != PersistentVolumeClaims,
			queuedAt:          map[types.NamespacedName]time.Time{},
			written:           newWriteLog(),
			items:             map[types.NamespacedName]struct{}{},
		}
		_ = inf.SetTransform(offloading.DropManagedFields)
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    r.onLocal,
			UpdateFunc: func(_, o any) { r.onLocal(o) },
			DeleteFunc: r.onLocal,
		})
		reflectors[kind] = r
		return r
	}
	var tokens *tokenManager
	var providerNodes cache.SharedIndexInformer
	var peerInformers []cache.SharedIndexInformer
	for _, kind := range AllKinds {
		if opts.Workers[kind] == 0 {
			logger.Info("Reflection disabled", "kind", kind)
			continue
		}
		switch kind {
		case ConfigMaps:
			newReflector(kind, configMapTranslator{}, localFactory.Core().V1().ConfigMaps().Informer())
		case Secrets:
			r := newReflector(kind, secretTranslator{}, localFactory.Core().V1().Secrets().Informer())
			r.ignoreRemote = isTokenSecret
		case ServiceAccounts:
			r := newReflector(kind, serviceAccountTranslator{}, localFactory.Core().V1().ServiceAccounts().Informer())
			tokens = &tokenManager{
				local: local, writer: writer, remote: rs, env: env, metrics: m, recorder: recorder,
				expiration: opts.TokenExpiration,
				pods:       podFactory.Core().V1().Pods().Informer(),
				rootCAs:    localFactory.Core().V1().ConfigMaps().Informer(),
				written:    newWriteLog(),
			}
			if err := tokens.setup(r); err != nil {
				return err
			}
			r.afterSync = tokens.sync
		case Services:
			newReflector(kind, serviceTranslator{}, localFactory.Core().V1().Services().Informer())
		case EndpointSlices:
			r := newReflector(kind, endpointSliceTranslator{}, localFactory.Discovery().V1().EndpointSlices().Informer())
			r.ignoreRemote = notFerrysEndpointSlice
			// The provider's other virtual nodes (its other node pools):
			// their pods' endpoints are the provider's own too, and
			// reflecting them would fight those nodes' reflections.
			providerNodes = providerNodesInformer(local, cfg.ProviderClusterID, opts.ResyncPeriod)
			env.ProviderNode = func(name string) bool {
				_, ok, _ := providerNodes.GetStore().GetByKey(name)
				return ok
			}
		case Ingresses:
			newReflector(kind, ingressTranslator{}, localFactory.Networking().V1().Ingresses().Informer())
		case NetworkPolicies:
			pods, nsInf := policyPeerPods(localFactory), localFactory.Core().V1().Namespaces().Informer()
			t := &networkPolicyTranslator{
				pods: pods.GetIndexer(), namespaces: nsInf.GetIndexer(), ns: ns,
				podCIDR: cfg.LocalPodCIDR, recorder: recorder, reported: map[types.UID]string{},
			}
			r := newReflector(kind, t, localFactory.Networking().V1().NetworkPolicies().Informer())
			// A policy's copy holds the addresses of the pods its peers
			// select, anywhere in this cluster: reflect every policy
			// again when one of them may have changed.
			again := func() {
				for _, local := range ns.locals() {
					r.enqueueNamespace(local)
				}
			}
			for _, inf := range []struct {
				i       cache.SharedIndexInformer
				changed func(o, n any) bool
			}{{pods, podChangesPolicies}, {nsInf, namespaceChangesPolicies}} {
				_, _ = inf.i.AddEventHandler(cache.ResourceEventHandlerFuncs{
					AddFunc: func(any) { again() },
					UpdateFunc: func(o, n any) {
						if inf.changed(o, n) {
							again()
						}
					},
					DeleteFunc: func(any) { again() },
				})
				peerInformers = append(peerInformers, inf.i)
			}
		case PersistentVolumeClaims:
			r := newReflector(kind, pvcTranslator{}, localFactory.Core().V1().PersistentVolumeClaims().Informer())
			r.ignoreRemote = isStorageFabricClaim
		case Events:
			ev = newEventReflector(opts.Workers[kind], cfg.ProviderClusterID, env, local, ns, rs, m, reflectors,
				podFactory.Core().V1().Pods().Informer())
		}
	}
	for _, kind := range remoteKinds(opts.Workers) {
		rs.kinds[kind] = remoteWatched[kind]
	}
	if len(rs.kinds) == 0 {
		logger.Info("Every kind's reflection is disabled")
		<-ctx.Done()
		return nil
	}
	rs.onEvent = func(kind Kind, obj any) {
		if r := reflectors[kind]; r != nil {
			r.onRemote(obj)
		}
		if kind == Secrets && tokens != nil {
			tokens.onRemote(obj)
		}
		if kind == Events && ev != nil {
			ev.onRemote(obj)
		}
	}

	scope, err := remotescope.Resolve(ctx, remote, cfg.RemoteScope, RemoteResources(opts))
	if err != nil {
		return err
	}
	rs.cluster = scope == remotescope.Cluster

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer rs.stopAll()
	if rs.cluster {
		if err := rs.start(runCtx, ""); err != nil {
			return err
		}
	}
	nsoChanged := make(chan struct{}, 1)
	nsoStore, nsoInformer := offloading.NamespaceOffloadingInformer(localFerry, nsoChanged)
	localFactory.Start(runCtx.Done())
	podFactory.Start(runCtx.Done())
	defer localFactory.Shutdown()
	defer podFactory.Shutdown()
	wg.Go(func() { nsoInformer.RunWithContext(runCtx) })
	synced := []cache.InformerSynced{nsoInformer.HasSynced}
	if providerNodes != nil {
		wg.Go(func() { providerNodes.RunWithContext(runCtx) })
		synced = append(synced, providerNodes.HasSynced)
	}
	for _, r := range reflectors {
		synced = append(synced, r.local.HasSynced)
	}
	if tokens != nil {
		synced = append(synced, tokens.pods.HasSynced, tokens.rootCAs.HasSynced)
	}
	if ev != nil {
		synced = append(synced, ev.pods.HasSynced)
	}
	for _, inf := range peerInformers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(runCtx.Done(), synced...) {
		return nil
	}
	apply := func() {
		for _, c := range ns.refresh(nsoStore) {
			if !rs.cluster {
				if c.added {
					if err := rs.start(runCtx, c.twin); err != nil {
						logger.Error(err, "Could not watch the twin namespace", "twinNamespace", c.twin)
					}
				} else {
					rs.stop(c.twin)
				}
			}
			if c.added {
				logger.Info("Reflecting namespace", "namespace", c.local, "twinNamespace", c.twin)
				for kind, r := range reflectors {
					r.enqueueNamespace(c.local)
					// Copies whose local object went while nobody watched
					// (a cluster-wide watch saw them before the mapping).
					for _, o := range rs.list(kind, c.twin) {
						r.onRemote(o)
					}
				}
			} else {
				logger.Info("Stopped reflecting namespace", "namespace", c.local, "twinNamespace", c.twin)
			}
		}
	}
	apply()
	wg.Go(func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-nsoChanged:
				apply()
			}
		}
	})
	if cfg.AddressesChanged != nil && (reflectors[EndpointSlices] != nil || reflectors[NetworkPolicies] != nil) {
		wg.Go(func() {
			for {
				select {
				case <-runCtx.Done():
					return
				case <-cfg.AddressesChanged:
					logger.Info("Network mapping changed; reflecting every EndpointSlice and NetworkPolicy again")
					for _, kind := range []Kind{EndpointSlices, NetworkPolicies} {
						if r := reflectors[kind]; r != nil {
							for _, local := range ns.locals() {
								r.enqueueNamespace(local)
							}
						}
					}
				}
			}
		})
	}
	for _, r := range reflectors {
		wg.Go(func() { r.run(runCtx) })
	}
	if ev != nil {
		wg.Go(func() { ev.run(runCtx) })
	}
	logger.Info("Reflecting", "provider", cfg.ProviderClusterID, "remoteScope", scope, "workers", opts.Workers)
	<-runCtx.Done()
	return nil
}

// providerNodesInformer watches this cluster's virtual nodes standing for
// provider: one, or one per node pool.
func providerNodesInformer(local kubernetes.Interface, provider ferryv1alpha1.ClusterID, resync time.Duration) cache.SharedIndexInformer {
	selector := labels.SelectorFromSet(labels.Set{ferryv1alpha1.LabelClusterID: string(provider), ferryv1alpha1.LabelNodeType: ferryv1alpha1.NodeTypeVirtual}).String()
	inf := coreinformers.NewFilteredNodeInformer(local, resync, cache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = selector })
	_ = inf.SetTransform(offloading.DropManagedFields)
	return inf
}
