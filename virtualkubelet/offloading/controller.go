package offloading

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/remotescope"
)

// Defaults of Config's zero fields.
const (
	DefaultWorkers     = 16
	DefaultClientQPS   = 200
	DefaultClientBurst = 400

	// notSyncedRetry is how soon a pod is looked at again while the watches
	// of its twin namespace are still listing.
	notSyncedRetry = 200 * time.Millisecond
	// healthPoll is how often the provider's health is looked at, to resync
	// every pod once it comes back.
	healthPoll = time.Second
)

// Config says which node's pods to offload where.
type Config struct {
	// Local is the consumer cluster, Provider the provider cluster (with
	// the consumer's credential, which reaches its twin namespaces, and
	// every namespace's ShadowPods and pods when the provider binds it to
	// ferry-reflection-reader).
	Local, Provider *rest.Config
	// RemoteScope says how the provider's ShadowPods and pods are watched:
	// cluster, one watch of each for the whole provider, shared by every
	// twin namespace; namespace, one of each per twin namespace; auto (or
	// empty) asks the provider. The
	// virtual kubelet resolves it once for the reflection and the pod
	// offloading together and passes the answer.
	RemoteScope remotescope.Scope
	// NodeName is the virtual node whose pods are offloaded.
	NodeName string
	// Pool is the pool of the provider's nodes the virtual node stands for
	// (its VirtualNode's spec.pool); nil: all of them.
	Pool *ferryv1alpha1.VirtualNodePool
	// ConsumerClusterID and ProviderClusterID identify the two clusters.
	ConsumerClusterID, ProviderClusterID ferryv1alpha1.ClusterID
	// Workers is how many pods are synced at once (default 16).
	Workers int
	// ClientQPS and ClientBurst bound the requests to each cluster
	// (defaults 200 and 400).
	ClientQPS   float32
	ClientBurst int
	// NodePods, when set, is the informer factory of the node's pods
	// (NodePodInformerFactory), shared with the reflection so the pods are
	// cached once; nil: one of its own.
	NodePods informers.SharedInformerFactory
	// RemapPodIP translates remote pod IPs (the network fabric's; identity
	// when nil).
	RemapPodIP IPRemapper
	// AddressesChanged signals that RemapPodIP or ConsumerAPIServer now
	// answer differently: every pod is synced again.
	AddressesChanged <-chan struct{}
	// ConsumerAPIServer says where pods in the provider reach this
	// cluster's API server (the network fabric's); nil or ok false: the
	// pods are left to the provider's kubernetes Service.
	ConsumerAPIServer func() (address string, port int32, ok bool)
	// ServiceAccountTokens says the reflection keeps a token Secret of each
	// offloaded pod's consumer service account in its twin namespace
	// (ServiceAccountTokenSecret): pods mount it instead of the consumer's
	// projected token, which only a consumer kubelet could fill.
	ServiceAccountTokens bool
	// ProviderReady tells whether the provider answers health checks. While
	// it does not, every pod is shown not Ready (unreachableStatus) and
	// nothing is asked of the provider; when it returns, its watches are
	// started again and every pod's status comes from their fresh lists.
	// Nil: always ready.
	ProviderReady func() bool
}

func (c Config) withDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.ClientQPS <= 0 {
		c.ClientQPS = DefaultClientQPS
	}
	if c.ClientBurst <= 0 {
		c.ClientBurst = DefaultClientBurst
	}
	if c.ProviderReady == nil {
		c.ProviderReady = func() bool { return true }
	}
	return c
}

// controller offloads the pods of one virtual node.
type controller struct {
	cfg      Config
	local    kubernetes.Interface
	remote   client.WithWatch
	pods     corelisters.PodLister
	twins    *twins
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	recorder record.EventRecorder
	// podIndex holds the node's local pods, to resync them all.
	podIndex cache.Indexer
	// pending times the quiet period of pods whose remote copy is Pending.
	pending *pendingClock
	// reachable is cfg.ProviderReady as watchHealth last acted on it: it
	// turns true only once the provider's watches were started again, so
	// no status is written from what they held before the outage.
	reachable atomic.Bool
}

// Run offloads the pods bound to cfg.NodeName until ctx is done.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	logger := klog.FromContext(ctx).WithName("offloading")
	ctx = klog.NewContext(ctx, logger)
	s, err := NewScheme()
	if err != nil {
		return fmt.Errorf("register API types: %w", err)
	}
	localCfg, remoteCfg := RateLimited(cfg.Local, cfg.ClientQPS, cfg.ClientBurst), RateLimited(cfg.Provider, cfg.ClientQPS, cfg.ClientBurst)
	local, err := kubernetes.NewForConfig(localCfg)
	if err != nil {
		return fmt.Errorf("build client of the local cluster: %w", err)
	}
	localFerry, err := client.NewWithWatch(localCfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("build client of the local cluster: %w", err)
	}
	remote, err := client.NewWithWatch(remoteCfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("build client of provider %s: %w", cfg.ProviderClusterID, err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: local.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	c := &controller{
		cfg:    cfg,
		local:  local,
		remote: remote,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "offloading"}),
		recorder: broadcaster.NewRecorder(s, corev1.EventSource{Component: "ferry-virtual-kubelet", Host: cfg.NodeName}),
		pending:  newPendingClock(),
	}
	c.reachable.Store(cfg.ProviderReady())
	defer c.queue.ShutDown()
	c.twins = &twins{provider: cfg.ProviderClusterID, consumer: cfg.ConsumerClusterID, remote: remote,
		enqueue: c.queue.Add, namespaceChanged: c.enqueueNamespace}
	scope := cfg.RemoteScope
	if scope == remotescope.Auto || scope == "" {
		kube, err := kubernetes.NewForConfig(remoteCfg)
		if err != nil {
			return fmt.Errorf("build client of provider %s: %w", cfg.ProviderClusterID, err)
		}
		if scope, err = remotescope.Resolve(ctx, kube, scope, RemoteResources()); err != nil {
			return err
		}
	}

	factory := cfg.NodePods
	if factory == nil {
		factory = NodePodInformerFactory(local, cfg.NodeName)
	}
	podInformer := factory.Core().V1().Pods()
	c.pods, c.podIndex = podInformer.Lister(), podInformer.Informer().GetIndexer()
	enqueuePod := func(o any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			c.queue.Add(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueuePod,
		UpdateFunc: func(_, o any) { enqueuePod(o) },
		DeleteFunc: enqueuePod,
	})

	nsoChanged := make(chan struct{}, 1)
	nsoStore, nsoInformer := NamespaceOffloadingInformer(localFerry, nsoChanged)

	var wg sync.WaitGroup
	defer wg.Wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(runCtx.Done())
	defer factory.Shutdown()
	wg.Go(func() { nsoInformer.RunWithContext(runCtx) })
	if scope == remotescope.Cluster {
		c.twins.startShared(runCtx)
	}
	if !cache.WaitForCacheSync(runCtx.Done(), podInformer.Informer().HasSynced, nsoInformer.HasSynced) {
		return ctx.Err()
	}
	c.twins.refresh(runCtx, nsoStore)
	wg.Go(func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-nsoChanged:
				c.twins.refresh(runCtx, nsoStore)
			}
		}
	})
	wg.Go(func() { c.watchHealth(runCtx) })
	wg.Go(func() { c.watchAddresses(runCtx) })
	for range cfg.Workers {
		wg.Go(func() {
			for c.processNext(runCtx) {
			}
		})
	}
	logger.Info("Offloading pods", "node", cfg.NodeName, "provider", cfg.ProviderClusterID, "remoteScope", scope, "workers", cfg.Workers)
	<-runCtx.Done()
	c.queue.ShutDown()
	return nil
}

// enqueueNamespace syncs every local pod of namespace again.
func (c *controller) enqueueNamespace(namespace string) {
	pods, err := c.pods.Pods(namespace).List(everything)
	if err != nil {
		return
	}
	for _, p := range pods {
		c.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
}

// watchHealth follows the provider's health. When the provider becomes
// unreachable, every pod is synced, which shows it not Ready: the node
// lifecycle controller does that for a kubelet it stops hearing from, but
// the virtual kubelet keeps its Node's Lease and reports Ready=Unknown
// itself, so the controller never does it for a virtual node. When the
// provider is back, its watches are started again before any pod is
// synced, so every status comes from what the provider says now.
func (c *controller) watchHealth(ctx context.Context) {
	ticker := time.NewTicker(healthPoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		c.followHealth(ctx)
	}
}

// followHealth acts on a change of the provider's health since the last
// call (watchHealth's ticks).
func (c *controller) followHealth(ctx context.Context) {
	switch ready := c.cfg.ProviderReady(); {
	case !ready && c.reachable.Load():
		klog.FromContext(ctx).Info("Provider unreachable; marking every pod not ready", "provider", c.cfg.ProviderClusterID)
		c.reachable.Store(false)
		c.resyncAll()
	case ready && !c.reachable.Load():
		klog.FromContext(ctx).Info("Provider is back; watching it afresh and resyncing every pod", "provider", c.cfg.ProviderClusterID)
		c.twins.restartWatches(ctx)
		c.reachable.Store(true)
		c.resyncAll()
	}
}

// watchAddresses resyncs every pod when the network fabric's mapping
// changes: pod IPs and the consumer API server's address follow it.
func (c *controller) watchAddresses(ctx context.Context) {
	if c.cfg.AddressesChanged == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.cfg.AddressesChanged:
			klog.FromContext(ctx).Info("Network mapping changed; resyncing every pod")
			c.resyncAll()
		}
	}
}

// resyncAll queues every pod of the node.
func (c *controller) resyncAll() {
	for _, obj := range c.podIndex.List() {
		if p, ok := obj.(*corev1.Pod); ok {
			c.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
}

func (c *controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	requeue, err := c.sync(ctx, key)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(1).Info("Pod sync failed; will retry", "pod", key, "err", err.Error())
		}
		c.queue.AddRateLimited(key)
	case requeue > 0:
		c.queue.Forget(key)
		c.queue.AddAfter(key, requeue)
	default:
		c.queue.Forget(key)
	}
	return true
}

// sync brings one local pod and its ShadowPod in line. It returns a delay
// after which to look again when it waits for something no watch reports.
func (c *controller) sync(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	pod, err := c.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return 0, err
	}
	if pod != nil && pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed &&
		!c.reachable.Load() {
		// Nothing the provider said can be trusted now, nor anything asked
		// of it: show the pod not Ready and wait for watchHealth's resync.
		c.pending.forget(key)
		c.writeStatus(ctx, pod, unreachableStatus(pod, c.cfg.ProviderClusterID))
		return 0, nil
	}
	t := c.twins.forLocal(key.Namespace).view()
	if t != nil && !t.synced() {
		return notSyncedRetry, nil
	}
	if pod == nil || pod.DeletionTimestamp != nil {
		c.pending.forget(key)
	}
	switch {
	case pod == nil:
		return 0, c.deleteOrphan(ctx, t, key.Name)
	case pod.DeletionTimestamp != nil:
		return 0, c.syncDeleting(ctx, t, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return 0, nil
	}
	if refusal := Refuse(pod); refusal != nil {
		if c.writeStatus(ctx, pod, refusedStatus(pod, refusal.Error())) {
			c.recorder.Event(pod, corev1.EventTypeWarning, ReasonOffloadingRefused, refusal.Error())
		}
		return 0, nil
	}
	if t == nil || (!t.ready && t.shadowPod(pod.Name) == nil) {
		// Nothing to offload to: say why, and wait for the NamespaceOffloading.
		msg := c.twins.whyNotOffloaded(pod.Namespace)
		if t != nil {
			msg = fmt.Sprintf("the twin namespace %s in cluster %s is not ready", t.name, c.cfg.ProviderClusterID)
		}
		if c.writeStatus(ctx, pod, statusWithCondition(pod, corev1.ConditionFalse, ReasonNamespaceNotOffloaded, msg)) {
			c.recorder.Event(pod, corev1.EventTypeWarning, ReasonNamespaceNotOffloaded, msg)
		}
		return 0, nil
	}

	var api *APIServerAccess
	if c.cfg.ConsumerAPIServer != nil {
		if addr, port, ok := c.cfg.ConsumerAPIServer(); ok {
			api = &APIServerAccess{Address: addr, Port: port}
		}
	}
	want, err := ShadowPodInPool(pod, c.cfg.ConsumerClusterID, t.name, c.cfg.ServiceAccountTokens, api, c.cfg.Pool)
	if err != nil {
		return 0, err
	}
	shadow := t.shadowPod(pod.Name)
	if shadow != nil && shadow.Labels[ferryv1alpha1.LabelOriginUID] != string(pod.UID) {
		// The ShadowPod of an earlier pod of the same name: remove it first.
		return 0, c.deleteShadowPod(ctx, shadow)
	}
	if shadow == nil {
		return 0, c.createShadowPod(ctx, pod, want)
	}
	if shadow.DeletionTimestamp != nil {
		return 0, nil // deleted under us on the provider: recreated once gone
	}
	if shadow.Annotations[AnnotationTemplateHash] != want.Annotations[AnnotationTemplateHash] {
		updated := shadow.DeepCopy()
		updated.Spec.Template = want.Spec.Template
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[AnnotationTemplateHash] = want.Annotations[AnnotationTemplateHash]
		if err := c.remote.Update(ctx, updated); err != nil {
			if remote := t.remotePod(pod.Name); remote != nil && remote.Labels[ferryv1alpha1.LabelOriginUID] == string(pod.UID) && resizeRequested(pod, remote) {
				// A resize the provider refuses (its quota): say so on the
				// pod, as a kubelet says why it does not resize.
				msg := fmt.Sprintf("cluster %s refused the resize: %v", c.cfg.ProviderClusterID, err)
				st := *pod.Status.DeepCopy()
				st.Conditions = withResizePending(pod, st.Conditions, resizeRefusalReason(apierrors.ReasonForError(err)), msg)
				if c.writeStatus(ctx, pod, st) {
					c.recorder.Event(pod, corev1.EventTypeWarning, ReasonResizeRefused, msg)
				}
			}
			return 0, fmt.Errorf("update shadow pod %s/%s: %w", t.name, pod.Name, err)
		}
		klog.FromContext(ctx).V(1).Info("Updated shadow pod", "pod", klog.KObj(pod), "twinNamespace", t.name)
	}

	if !c.reachable.Load() {
		return 0, nil // gone meanwhile: watchHealth's resync shows the pod not Ready
	}
	remote := t.remotePod(pod.Name)
	if remote != nil && remote.Labels[ferryv1alpha1.LabelOriginUID] != string(pod.UID) {
		remote = nil
	}
	switch {
	case remote != nil:
		st := statusFromRemote(pod, remote, shadow.Status.Recreations, c.cfg.ProviderClusterID, c.cfg.RemapPodIP)
		if refused := shadowResizeRefusal(shadow); refused != nil && resizeRequested(pod, remote) {
			msg := fmt.Sprintf("cluster %s refused the resize: %s", c.cfg.ProviderClusterID, refused.Message)
			st.Conditions = withResizePending(pod, st.Conditions, resizeRefusalReason(metav1.StatusReason(refused.Reason)), msg)
		}
		if st.Phase != corev1.PodPending {
			c.pending.forget(key)
		} else if wait := c.pending.wait(key, pod.UID, pendingQuietFor(remote)); wait > 0 && !equality.Semantic.DeepEqual(pod.Status, st) {
			return wait, nil
		}
		before := offloadedCondition(pod)
		if c.writeStatus(ctx, pod, st) {
			// The provider's reason for holding the pod, once per new reason.
			cond := offloadedConditionIn(st.Conditions)
			if _, warn := pendingReason(remote); warn && cond.Reason == ReasonPendingRemotely &&
				(before == nil || before.Reason != cond.Reason || before.Message != cond.Message) {
				c.recorder.Event(pod, corev1.EventTypeWarning, ReasonPendingRemotely, cond.Message)
			}
		}
	case shadowRejection(shadow) != nil:
		cond := shadowRejection(shadow)
		msg := fmt.Sprintf("cluster %s cannot create the pod: %s: %s", c.cfg.ProviderClusterID, cond.Reason, cond.Message)
		if refusedForGood(metav1.StatusReason(cond.Reason)) {
			if c.writeStatus(ctx, pod, refusedStatus(pod, msg)) {
				c.recorder.Event(pod, corev1.EventTypeWarning, ReasonOffloadingRefused, msg)
			}
		} else if c.writeStatus(ctx, pod, statusWithCondition(pod, corev1.ConditionFalse, ReasonShadowPodRejected, msg)) {
			c.recorder.Event(pod, corev1.EventTypeWarning, ReasonShadowPodRejected, msg)
		}
	}
	if remote == nil && lostRemotePod(pod, shadow) {
		return 0, c.recordLostPod(ctx, pod, shadow)
	}
	return 0, nil
}

// writeStatus writes status on the local pod when it differs, and reports
// whether it wrote. A conflict is left to the informer's next event.
//
// The same write carries the pod-deletion-cost of the namespace's placement
// preference (placement.WithDeletionCost): the pods/status subresource keeps
// the metadata's annotations a request changes, so the scale-down order of
// offloaded pods costs no write of its own, except when the preference
// changes under running pods.
func (c *controller) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) bool {
	annotations, costChanged := placement.WithDeletionCost(pod.Annotations, c.twins.preference(pod))
	if !costChanged && equality.Semantic.DeepEqual(pod.Status, status) {
		return false
	}
	updated := pod.DeepCopy()
	updated.Status = status
	if costChanged {
		updated.Annotations = annotations
	}
	_, err := c.local.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	switch {
	case err == nil:
		klog.FromContext(ctx).V(2).Info("Updated pod status", "pod", klog.KObj(pod), "phase", status.Phase)
		return true
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return false
	default:
		klog.FromContext(ctx).Error(err, "Could not update pod status", "pod", klog.KObj(pod))
		c.queue.AddRateLimited(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		return false
	}
}

func (c *controller) createShadowPod(ctx context.Context, pod *corev1.Pod, sp *ferryv1alpha1.ShadowPod) error {
	err := c.remote.Create(ctx, sp)
	switch {
	case err == nil:
		klog.FromContext(ctx).V(1).Info("Offloaded pod", "pod", klog.KObj(pod), "twinNamespace", sp.Namespace)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil // the watch brings it
	}
	if refusedForGood(apierrors.ReasonForError(err)) {
		// Asking again gets the same answer: fail the pod, as a kubelet
		// fails one it cannot admit.
		msg := fmt.Sprintf("cluster %s refuses the pod as it is: %v", c.cfg.ProviderClusterID, err)
		if c.writeStatus(ctx, pod, refusedStatus(pod, msg)) {
			c.recorder.Event(pod, corev1.EventTypeWarning, ReasonOffloadingRefused, msg)
		}
		klog.FromContext(ctx).V(1).Info("Provider refused the pod for good", "pod", klog.KObj(pod), "err", err.Error())
		return nil
	}
	reason, msg := ReasonShadowPodRejected, fmt.Sprintf("cluster %s refused the shadow pod: %v", c.cfg.ProviderClusterID, err)
	if !apierrors.IsForbidden(err) {
		reason, msg = ReasonOffloadRetrying, fmt.Sprintf("cluster %s could not take the shadow pod yet, retrying: %v", c.cfg.ProviderClusterID, err)
	}
	if c.writeStatus(ctx, pod, statusWithCondition(pod, corev1.ConditionFalse, reason, msg)) {
		c.recorder.Event(pod, corev1.EventTypeWarning, reason, msg)
	}
	return fmt.Errorf("create shadow pod %s/%s: %w", sp.Namespace, sp.Name, err)
}

func (c *controller) deleteShadowPod(ctx context.Context, sp *ferryv1alpha1.ShadowPod) error {
	if sp.DeletionTimestamp != nil {
		return nil
	}
	err := c.remote.Delete(ctx, sp, client.Preconditions{UID: &sp.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete shadow pod %s/%s: %w", sp.Namespace, sp.Name, err)
	}
	return nil
}

// deleteOrphan removes the ShadowPod of a local pod that is gone.
func (c *controller) deleteOrphan(ctx context.Context, t *twinView, name string) error {
	if t == nil {
		return nil
	}
	if sp := t.shadowPod(name); sp != nil && OwnShadowPod(sp, c.cfg.NodeName) {
		klog.FromContext(ctx).V(1).Info("Removing shadow pod of a deleted pod", "twinNamespace", t.name, "name", name)
		return c.deleteShadowPod(ctx, sp)
	}
	return nil
}

// syncDeleting carries a local deletion to the provider with its grace
// period and, once the remote pod is gone, removes the local pod, as a
// kubelet does once its containers have stopped.
func (c *controller) syncDeleting(ctx context.Context, t *twinView, pod *corev1.Pod) error {
	if t != nil {
		sp := t.shadowPod(pod.Name)
		if sp != nil && sp.Labels[ferryv1alpha1.LabelOriginUID] != string(pod.UID) {
			sp = nil
		}
		remote := t.remotePod(pod.Name)
		if remote != nil && remote.Labels[ferryv1alpha1.LabelOriginUID] != string(pod.UID) {
			remote = nil
		}
		var errs []error
		if sp != nil {
			errs = append(errs, c.deleteShadowPod(ctx, sp))
		}
		if remote != nil && remote.DeletionTimestamp == nil {
			opts := []client.DeleteOption{client.Preconditions{UID: &remote.UID}}
			if pod.DeletionGracePeriodSeconds != nil {
				opts = append(opts, client.GracePeriodSeconds(*pod.DeletionGracePeriodSeconds))
			}
			if err := c.remote.Delete(ctx, remote, opts...); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("delete remote pod %s/%s: %w", remote.Namespace, remote.Name, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if sp != nil || remote != nil {
			return nil // their deletion wakes us
		}
	}
	err := c.local.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).V(1).Info("Pod deleted", "pod", klog.KObj(pod))
	return nil
}
