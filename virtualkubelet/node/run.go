package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
	"github.com/ferry-io/ferry/version"
	"github.com/ferry-io/ferry/virtualkubelet/kubeletapi"
	"github.com/ferry-io/ferry/virtualkubelet/network"
	"github.com/ferry-io/ferry/virtualkubelet/offloading"
	"github.com/ferry-io/ferry/virtualkubelet/reflection"
	"github.com/ferry-io/ferry/virtualkubelet/servingcert"
)

const (
	virtualNodesResource = "virtualnodes"
	userAgent            = "ferry-virtual-kubelet"

	// Failed writes (Node taints, VirtualNode status) are retried with
	// this backoff.
	retryInitial = time.Second
	retryMax     = 30 * time.Second

	// stopStatusTimeout bounds the status write on the way out.
	stopStatusTimeout = 5 * time.Second
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=virtualnodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=ferry.io,resources=virtualnodes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=configmaps,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=namespaceoffloadings,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get;list;watch

// Run serves the VirtualNode opts names, in the local cluster local: it
// registers its Node, keeps it alive with a Lease, reports the provider's
// health and the VirtualNode's changes on it, keeps the VirtualNode's
// status, offloads the pods bound to the Node to the provider, and serves
// the kubelet API (logs, exec, attach, port-forward, stats) for them. It
// blocks until ctx is done and then returns nil, leaving the Node
// in place (whoever owns the VirtualNode deletes it); it returns an error when
// it cannot start (invalid options, a missing VirtualNode or credentials
// Secret) or the Node cannot be registered.
func Run(ctx context.Context, local *rest.Config, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.withDefaults()
	key := types.NamespacedName{Namespace: opts.VirtualNodeNamespace, Name: opts.VirtualNodeName}
	logger := klog.FromContext(ctx).WithValues("virtualNode", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)

	local = rest.CopyConfig(local)
	if local.UserAgent == "" {
		local.UserAgent = userAgent
	}
	kube, err := kubernetes.NewForConfig(local)
	if err != nil {
		return fmt.Errorf("build client of the local cluster: %w", err)
	}
	vnClient, err := newVirtualNodeClient(local)
	if err != nil {
		return err
	}
	r := &runner{
		opts:          opts,
		key:           key,
		kube:          kube,
		vnClient:      vnClient,
		started:       time.Now(),
		vnChanged:     make(chan struct{}, 1),
		pendingSignal: make(chan struct{}, 1),
		notifySet:     make(chan struct{}),
		retryDelay:    retryInitial,
	}

	vn, err := r.getVirtualNode(ctx)
	if err != nil {
		return err
	}
	providerCfg, err := r.providerConfig(ctx, vn)
	if err != nil {
		return err
	}
	prober, err := newProber(providerCfg, opts.HealthCheckTimeout)
	if err != nil {
		return err
	}
	consumer, err := r.consumerClusterID(ctx)
	if err != nil {
		return err
	}
	r.vn = vn
	r.health = NewHealth(opts.FailureThreshold, r.started)
	r.providerReady.Store(true)
	listener, err := net.Listen("tcp", opts.KubeletAddress)
	if err != nil {
		return fmt.Errorf("--kubelet-address: %w", err)
	}
	defer listener.Close()
	r.endpoint = Endpoint{IP: opts.NodeIP, Port: int32(listener.Addr().(*net.TCPAddr).Port)}
	node, err := BuildNode(vn, r.health, r.started, r.endpoint)
	if err != nil {
		return err
	}
	r.pushed = node
	nc, err := vknode.NewNodeController(r, node.DeepCopy(), kube.CoreV1().Nodes(),
		vknode.WithNodeEnableLeaseV1(kube.CoordinationV1().Leases(corev1.NamespaceNodeLease), opts.LeaseDurationSeconds),
		vknode.WithNodeStatusUpdateInterval(opts.NodeStatusReportFrequency))
	if err != nil {
		return fmt.Errorf("set up node controller of node %s: %w", node.Name, err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	signal := func(any) {
		select {
		case r.vnChanged <- struct{}{}:
		default:
		}
	}
	store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger: &logger,
		ListerWatcher: cache.NewFilteredListWatchFromClient(vnClient, virtualNodesResource, key.Namespace, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
		}),
		ObjectType: &ferryv1alpha1.VirtualNode{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    signal,
			UpdateFunc: func(_, obj any) { signal(obj) },
			DeleteFunc: signal,
		},
	})
	r.store = store

	certs, err := r.servingCertificate(runCtx, node.Name)
	if err != nil {
		return err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(version.Collector("ferry-virtual-kubelet"))
	api, err := kubeletapi.New(kubeletapi.Config{
		NodeName: node.Name, ProviderClusterID: vn.Spec.ClusterID,
		Local: local, Provider: providerCfg, Listener: listener, Certificate: certs.Current,
		Metrics: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}),
	})
	if err != nil {
		return err
	}
	probes := make(chan error)
	var wg sync.WaitGroup
	wg.Go(func() { informer.RunWithContext(runCtx) })
	wg.Go(func() { r.probeLoop(runCtx, prober, probes) })
	wg.Go(func() { r.loop(runCtx, nc.Ready(), informer.HasSynced, probes) })
	// The node's pods, cached once for the offloading and the reflection.
	nodePods := offloading.NodePodInformerFactory(kube, node.Name)
	addrs := network.New(consumer, vn.Spec.ClusterID, opts.DisableNetwork)
	wg.Go(func() { addrs.Run(runCtx, vnClient) })
	var apiServer func() (string, int32, bool)
	if !opts.DisableConsumerAPIServer {
		apiServer = addrs.APIServer
	}
	offloadErr, reflectErr := make(chan error, 1), make(chan error, 1)
	var scopeErr error // read after wg.Wait
	wg.Go(func() {
		// One decision, asked of the provider once, for both.
		var scope remotescope.Scope
		if scope, scopeErr = resolveRemoteScope(runCtx, providerCfg, opts); scopeErr != nil {
			offloadErr <- nil
			reflectErr <- nil
			cancel()
			return
		}
		wg.Go(func() {
			offloadErr <- offloading.Run(runCtx, offloading.Config{
				Local: local, Provider: providerCfg, NodeName: node.Name, Pool: vn.Spec.Pool, RemoteScope: scope,
				ConsumerClusterID: consumer, ProviderClusterID: vn.Spec.ClusterID,
				Workers: opts.PodSyncWorkers, ClientQPS: opts.ClientQPS, ClientBurst: opts.ClientBurst,
				ProviderReady:        r.providerReady.Load,
				ServiceAccountTokens: opts.Reflection.WithDefaults().Workers[reflection.ServiceAccounts] > 0,
				NodePods:             nodePods,
				RemapPodIP:           addrs.ProviderPodIP,
				AddressesChanged:     addrs.Changed(),
				ConsumerAPIServer:    apiServer,
			})
			cancel()
		})
		wg.Go(func() {
			reflectErr <- reflection.Run(runCtx, reflection.Config{
				Local: local, Provider: providerCfg, NodeName: node.Name, RemoteScope: scope,
				ConsumerClusterID: consumer, ProviderClusterID: vn.Spec.ClusterID,
				Options: opts.Reflection, Registry: registry, NodePods: nodePods,
				RemapIP: addrs.LocalPodIP, AddressesChanged: addrs.Changed(), LocalPodCIDR: addrs.LocalPodCIDR,
			})
			cancel()
		})
	})
	wg.Go(func() {
		if err := api.Run(vklog.WithLogger(runCtx, vkLogger{l: logger.WithName("kubelet-api")})); err != nil {
			logger.Error(err, "Kubelet API stopped; logs, exec and port-forward are unavailable on this node")
		}
	})
	// The node controller's status callback blocks while the controller
	// writes, and forever once it has stopped with an update queued; so the
	// pusher is not waited for (it returns as soon as it is not blocked).
	go r.pushLoop(runCtx)

	logger.Info("Starting virtual kubelet", "node", node.Name, "provider", providerCfg.Host,
		"healthCheckPeriod", opts.HealthCheckPeriod, "healthCheckTimeout", opts.HealthCheckTimeout,
		"failureThreshold", opts.FailureThreshold, "leaseDurationSeconds", opts.LeaseDurationSeconds)
	ncErr := nc.Run(vklog.WithLogger(runCtx, vkLogger{l: logger.WithName("node-controller")}))
	cancel()
	wg.Wait()
	if ncErr != nil && ctx.Err() == nil {
		return fmt.Errorf("run node controller of node %s: %w", node.Name, ncErr)
	}
	if scopeErr != nil && ctx.Err() == nil {
		return fmt.Errorf("start the pod offloading and the reflection of node %s: %w", node.Name, scopeErr)
	}
	if err := <-offloadErr; err != nil && ctx.Err() == nil {
		return fmt.Errorf("offload pods of node %s: %w", node.Name, err)
	}
	if err := <-reflectErr; err != nil && ctx.Err() == nil {
		return fmt.Errorf("reflect the objects of node %s's pods: %w", node.Name, err)
	}
	r.reportStopped(ctx)
	logger.Info("Virtual kubelet stopped", "node", node.Name)
	return nil
}

// resolveRemoteScope is how the pod offloading and the reflection watch the
// provider: opts.RemoteScope, or for auto what the provider lets the
// consumer do with every kind either watches.
func resolveRemoteScope(ctx context.Context, provider *rest.Config, opts Options) (remotescope.Scope, error) {
	if opts.RemoteScope != remotescope.Auto && opts.RemoteScope != "" {
		return opts.RemoteScope, nil
	}
	c, err := kubernetes.NewForConfig(provider)
	if err != nil {
		return "", fmt.Errorf("build client of the provider: %w", err)
	}
	resources := append(offloading.RemoteResources(), reflection.RemoteResources(opts.Reflection)...)
	scope, err := remotescope.Resolve(ctx, c, opts.RemoteScope, resources)
	if err != nil {
		return "", fmt.Errorf("decide how to watch the provider: %w", err)
	}
	klog.FromContext(ctx).Info("Decided how to watch the provider", "remoteScope", scope)
	return scope, nil
}

// servingCertificate is the kubelet API's certificate: from the files the
// options name, or requested of the local cluster for the node's address.
func (r *runner) servingCertificate(ctx context.Context, nodeName string) (servingcert.Source, error) {
	if r.opts.KubeletTLSCertFile != "" {
		return servingcert.Files(ctx, r.opts.KubeletTLSCertFile, r.opts.KubeletTLSKeyFile, time.Minute)
	}
	return servingcert.Request(ctx, r.kube, nodeName, []net.IP{net.ParseIP(r.endpoint.IP)}, nil)
}

// newVirtualNodeClient is a REST client of ferry.io/v1alpha1 in the local
// cluster, decoding into ferry's typed objects.
func newVirtualNodeClient(local *rest.Config) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := ferryv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register ferry's API types: %w", err)
	}
	cfg := rest.CopyConfig(local)
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &ferryv1alpha1.GroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build %s client of the local cluster: %w", ferryv1alpha1.GroupVersion, err)
	}
	return c, nil
}

// runner is one Run's state. The fields after "owned by loop" are only
// touched by the loop goroutine (and by Run once it has ended).
type runner struct {
	opts     Options
	key      types.NamespacedName
	kube     kubernetes.Interface
	vnClient rest.Interface
	store    cache.Store
	started  time.Time

	vnChanged chan struct{} // the informer saw the VirtualNode change

	// The node controller's status callback, and the latest Node report
	// waiting to be handed to it.
	notify        func(*corev1.Node)
	notifySet     chan struct{} // closed once notify is set
	pendingMu     sync.Mutex
	pending       *corev1.Node
	pendingSignal chan struct{}

	// owned by loop
	vn     *ferryv1alpha1.VirtualNode // latest known
	vnGone bool                       // deleted while we run
	health Health
	// providerReady mirrors health.Ready for the pod offloading.
	providerReady atomic.Bool
	pushed        *corev1.Node // the last report handed to the node controller
	endpoint      Endpoint     // the kubelet API's, set before the loop starts
	nodeReady     bool         // the node controller registered the Node
	taintsSynced  bool
	taintsApplied []corev1.Taint // ferry's taints as last applied to the Node
	// labelsDropped are labels ferry set on the Node and no longer wants
	// (a provider's zone that stopped agreeing), still to remove.
	labelsDropped map[string]bool
	// The status last written and the resourceVersion it was written over,
	// so the write is not repeated before the informer sees it.
	wroteOverRV string
	wroteStatus *ferryv1alpha1.VirtualNodeStatus
	retryDelay  time.Duration
}

var _ vknode.NodeProvider = (*runner)(nil)

// Ping implements vknode.NodeProvider: the node is alive as long as this
// process runs. The provider's health shows in the Ready condition instead.
func (r *runner) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus implements vknode.NodeProvider; the node controller calls
// it once, when it starts.
func (r *runner) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	r.notify = cb
	close(r.notifySet)
}

func (r *runner) getVirtualNode(ctx context.Context) (*ferryv1alpha1.VirtualNode, error) {
	vn := &ferryv1alpha1.VirtualNode{}
	if err := r.vnClient.Get().Namespace(r.key.Namespace).Resource(virtualNodesResource).Name(r.key.Name).Do(ctx).Into(vn); err != nil {
		return nil, fmt.Errorf("read virtual node %s: %w", r.key, err)
	}
	return vn, nil
}

// consumerClusterID reads this cluster's ClusterID, which labels every
// object the virtual kubelet makes on the provider.
func (r *runner) consumerClusterID(ctx context.Context) (ferryv1alpha1.ClusterID, error) {
	cm, err := r.kube.CoreV1().ConfigMaps(ferryv1alpha1.SystemNamespace).Get(ctx, ferryv1alpha1.ClusterIdentityConfigMap, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read this cluster's identity (ConfigMap %s/%s): %w", ferryv1alpha1.SystemNamespace, ferryv1alpha1.ClusterIdentityConfigMap, err)
	}
	id := cm.Data[ferryv1alpha1.ClusterIdentityKey]
	if id == "" {
		return "", fmt.Errorf("ConfigMap %s/%s has no key %q", ferryv1alpha1.SystemNamespace, ferryv1alpha1.ClusterIdentityConfigMap, ferryv1alpha1.ClusterIdentityKey)
	}
	return ferryv1alpha1.ClusterID(id), nil
}

func (r *runner) providerConfig(ctx context.Context, vn *ferryv1alpha1.VirtualNode) (*rest.Config, error) {
	name := vn.Spec.KubeconfigSecretRef.Name
	if name == "" {
		return nil, fmt.Errorf("virtual node %s has no spec.kubeconfigSecretRef.name", r.key)
	}
	secret, err := r.kube.CoreV1().Secrets(vn.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read secret %s/%s (spec.kubeconfigSecretRef of virtual node %s): %w", vn.Namespace, name, r.key, err)
	}
	return ProviderConfig(vn, secret)
}

// probeLoop probes the provider at once and then every HealthCheckPeriod,
// sending each result to results.
func (r *runner) probeLoop(ctx context.Context, p *prober, results chan<- error) {
	ticker := time.NewTicker(r.opts.HealthCheckPeriod)
	defer ticker.Stop()
	for {
		err := p.probe(ctx)
		select {
		case results <- err:
		case <-ctx.Done():
			return
		}
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

// pushLoop hands the latest pending Node report to the node controller.
func (r *runner) pushLoop(ctx context.Context) {
	select {
	case <-r.notifySet:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.pendingSignal:
		}
		r.pendingMu.Lock()
		n := r.pending
		r.pending = nil
		r.pendingMu.Unlock()
		if n != nil && ctx.Err() == nil {
			r.notify(n)
		}
	}
}

func (r *runner) push(n *corev1.Node) {
	r.pendingMu.Lock()
	r.pending = n.DeepCopy()
	r.pendingMu.Unlock()
	select {
	case r.pendingSignal <- struct{}{}:
	default:
	}
}

// loop reacts to VirtualNode changes, probe results and the Node's
// registration, and brings the Node and the VirtualNode's status in line.
func (r *runner) loop(ctx context.Context, nodeRegistered <-chan struct{}, informerSynced func() bool, probes <-chan error) {
	logger := klog.FromContext(ctx)
	var retryTimer *time.Timer
	var retryC <-chan time.Time
	defer func() {
		if retryTimer != nil {
			retryTimer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.vnChanged:
			r.refreshVirtualNode(logger, informerSynced())
		case err := <-probes:
			if !r.health.Observe(err, time.Now()) {
				if err != nil {
					logger.V(2).Info("Provider health check failed", "consecutiveFailures", r.health.Failures, "err", err)
				}
				continue
			}
			r.providerReady.Store(r.health.Ready)
			logger.Info("Provider health changed", "ready", r.health.Ready, "reason", r.health.Reason, "message", r.health.Message)
		case <-nodeRegistered:
			nodeRegistered = nil
			r.nodeReady = true
			logger.Info("Node registered", "node", NodeName(r.vn))
		case <-retryC:
			retryC = nil
		}
		if err := r.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error(err, "Sync failed; will retry", "after", r.retryDelay)
			if retryTimer != nil {
				retryTimer.Stop()
			}
			retryTimer = time.NewTimer(r.retryDelay)
			retryC = retryTimer.C
			r.retryDelay = min(2*r.retryDelay, retryMax)
			continue
		}
		r.retryDelay = retryInitial
	}
}

// refreshVirtualNode takes the informer's copy of the VirtualNode.
func (r *runner) refreshVirtualNode(logger klog.Logger, synced bool) {
	obj, exists, err := r.store.GetByKey(r.key.String())
	switch {
	case err != nil:
		logger.Error(err, "Read virtual node from the informer")
	case exists:
		if vn, ok := obj.(*ferryv1alpha1.VirtualNode); ok {
			r.vn, r.vnGone = vn, false
		}
	case synced && !r.vnGone:
		r.vnGone = true
		logger.Info("Virtual node deleted; the node keeps its last state until this virtual kubelet is stopped")
	}
}

// sync brings the Node (its report through the node controller, its taints)
// and the VirtualNode's status in line with the latest VirtualNode and
// health, writing only what changed.
func (r *runner) sync(ctx context.Context) error {
	vn := r.vn
	node, err := BuildNode(vn, r.health, r.started, r.endpoint)
	if err != nil {
		return err
	}
	if !nodeReportEqual(node, r.pushed) {
		klog.FromContext(ctx).V(1).Info("Updating node", "node", node.Name, "generation", vn.Generation)
		r.labelsDropped = DroppedLabels(r.labelsDropped, r.pushed.Labels, node.Labels)
		r.push(node)
		r.pushed = node
	}
	if !r.nodeReady {
		return nil
	}
	if len(r.labelsDropped) > 0 {
		if err := r.removeLabels(ctx, node.Name, r.labelsDropped); err != nil {
			return err
		}
		r.labelsDropped = nil
	}
	managed := NodeTaints(vn)
	if !r.taintsSynced || !taintsEqual(managed, r.taintsApplied) {
		if err := r.applyTaints(ctx, node.Name, managed); err != nil {
			return err
		}
		r.taintsApplied, r.taintsSynced = managed, true
	}
	if r.vnGone {
		return nil
	}
	return r.writeStatus(ctx, vn, true)
}

// removeLabels removes labels from the Node with a merge patch (a label
// already gone is no change). The node controller's own patches cannot be
// relied on for it: they remove only labels recorded in their last-applied
// annotation, which a Node just registered does not carry yet.
func (r *runner) removeLabels(ctx context.Context, nodeName string, labels map[string]bool) error {
	null := make(map[string]any, len(labels))
	for k := range labels {
		null[k] = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": null}})
	if err != nil {
		return fmt.Errorf("encode label removal of node %s: %w", nodeName, err)
	}
	if _, err := r.kube.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("remove labels %v of node %s: %w", slices.Sorted(maps.Keys(labels)), nodeName, err)
	}
	klog.FromContext(ctx).V(1).Info("Removed node labels", "node", nodeName, "labels", slices.Sorted(maps.Keys(labels)))
	return nil
}

// applyTaints sets ferry's taints on the Node, keeping the ones others put
// there, with a patch only when they differ.
func (r *runner) applyTaints(ctx context.Context, nodeName string, managed []corev1.Taint) error {
	nodes := r.kube.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := nodes.Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read node %s: %w", nodeName, err)
		}
		merged, changed := MergeTaints(current.Spec.Taints, r.taintsApplied, managed)
		if !changed {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
			"spec":     map[string]any{"taints": merged},
		})
		if err != nil {
			return fmt.Errorf("encode taints of node %s: %w", nodeName, err)
		}
		if _, err := nodes.Patch(ctx, nodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch taints of node %s: %w", nodeName, err)
		}
		klog.FromContext(ctx).V(1).Info("Updated node taints", "node", nodeName, "taints", merged)
		return nil
	})
}

// writeStatus patches the VirtualNode's status when it should change.
func (r *runner) writeStatus(ctx context.Context, vn *ferryv1alpha1.VirtualNode, running bool) error {
	base := vn.Status
	if r.wroteStatus != nil && vn.ResourceVersion == r.wroteOverRV {
		base = *r.wroteStatus
	}
	status, changed := VirtualNodeStatus(base, vn.Generation, NodeName(vn), running, r.health, metav1.NewTime(time.Now().Truncate(time.Second)))
	if !changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": vn.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		return fmt.Errorf("encode status of virtual node %s: %w", r.key, err)
	}
	err = r.vnClient.Patch(types.MergePatchType).Namespace(vn.Namespace).Resource(virtualNodesResource).Name(vn.Name).
		SubResource("status").Body(patch).Do(ctx).Error()
	switch {
	case apierrors.IsConflict(err):
		// A newer VirtualNode is on its way through the informer, which
		// will sync again.
		klog.FromContext(ctx).V(2).Info("Virtual node changed meanwhile; status write deferred")
		return nil
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("update status of virtual node %s: %w", r.key, err)
	}
	r.wroteOverRV, r.wroteStatus = vn.ResourceVersion, &status
	klog.FromContext(ctx).V(1).Info("Updated virtual node status", "running", running, "nodeReady", r.health.Ready, "observedGeneration", status.ObservedGeneration)
	return nil
}

// reportStopped sets VirtualKubeletRunning=False on the way out, best effort:
// the VirtualNode may be gone already.
func (r *runner) reportStopped(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopStatusTimeout)
	defer cancel()
	vn, err := r.getVirtualNode(ctx)
	if err == nil {
		r.wroteStatus = nil
		err = r.writeStatus(ctx, vn, false)
	}
	if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.DeadlineExceeded) {
		klog.FromContext(ctx).Error(err, "Could not report the virtual kubelet stopped")
	}
}
