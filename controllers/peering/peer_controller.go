package peering

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// PeerReconciler follows, on a consumer, each provider this cluster peers
// with: it probes the provider's API server, asks for resources in its
// tenant namespace, turns the grant into a VirtualNode served by a virtual
// kubelet, and reports it all as ForeignCluster conditions. Deleting the
// ForeignCluster (unpeering) removes the virtual node, the remote request and
// the credential.
type PeerReconciler struct {
	client.Client
	// ClusterID of this (the consumer) cluster.
	ClusterID ferryv1alpha1.ClusterID
	// Launcher runs the virtual kubelets.
	Launcher VirtualKubeletLauncher
	// Providers hands out provider clients; shared with the other consumer
	// controllers (NewProviderClients over the manager's cache when nil).
	Providers *ProviderClients
	// Now is the clock deciding credential renewals (time.Now when nil).
	Now func() time.Time

	mu      sync.Mutex
	watches map[string]grantWatch   // by ForeignCluster name
	wake    chan event.GenericEvent // grant changes seen by watchGrant
	baseCtx context.Context         // the manager's, for the grant watches
	// identities are the virtual nodes whose virtual kubelet identity this
	// process applied; the others get it applied on their next round.
	identities map[types.NamespacedName]bool
}

// grantWatch is the watch of one provider's grant, opened with the provider
// clients it was started for: new clients (a renewed credential) restart it.
type grantWatch struct {
	provider *Provider
	stop     context.CancelFunc
}

// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=foreignclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ferry.io,resources=virtualnodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=secrets,verbs=get;list;watch;update;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;delete

// Reconcile follows one provider.
func (r *PeerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var fc ferryv1alpha1.ForeignCluster
	if err := r.Get(ctx, req.NamespacedName, &fc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !fc.DeletionTimestamp.IsZero() || !isProvider(&fc) {
		return ctrl.Result{}, r.unpeer(ctx, &fc)
	}
	if controllerutil.AddFinalizer(&fc, PeerFinalizer) {
		if err := r.Update(ctx, &fc); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	period := time.Duration(fc.Spec.HealthCheck.PeriodSeconds) * time.Second
	if period <= 0 {
		period = 10 * time.Second
	}
	status := fc.Status.DeepCopy()
	status.ObservedGeneration = fc.Generation
	r.follow(ctx, &fc, status)
	r.reportVirtualNode(ctx, &fc, status)

	if !equality.Semantic.DeepEqual(status, &fc.Status) {
		fc.Status = *status
		if err := r.Status().Update(ctx, &fc); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status of %s: %w", fc.Name, err)
		}
	}
	return ctrl.Result{RequeueAfter: period}, nil
}

// follow runs one round of peering with the provider, recording each step as
// a condition; a failed step leaves the later ones as they were.
func (r *PeerReconciler) follow(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, status *ferryv1alpha1.ForeignClusterStatus) {
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: fc.Generation})
	}
	prov, err := r.providerClient(ctx, fc)
	if err != nil {
		set(ferryv1alpha1.ForeignClusterAuthenticated, false, "CredentialsInvalid", err.Error())
		return
	}
	status.RemoteTenantNamespace = prov.TenantNamespace

	timeout := time.Duration(fc.Spec.HealthCheck.TimeoutSeconds) * time.Second
	probeCtx, cancel := context.WithTimeout(ctx, max(timeout, time.Second))
	_, err = prov.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(probeCtx)
	cancel()
	if apierrors.IsUnauthorized(err) {
		// It answers, but not to this credential (revoked, or expired):
		// an invalid token is refused even on /readyz.
		set(ferryv1alpha1.ForeignClusterAPIServerReady, true, "Ready", "the provider's API server answers /readyz")
		set(ferryv1alpha1.ForeignClusterAuthenticated, false, "Unauthorized", "the provider refused the credential: "+err.Error())
		return
	}
	if err != nil {
		set(ferryv1alpha1.ForeignClusterAPIServerReady, false, "Unreachable", err.Error())
		return
	}
	set(ferryv1alpha1.ForeignClusterAPIServerReady, true, "Ready", "the provider's API server answers /readyz")
	if status.APIServerVersion == "" {
		if v, err := prov.Kube.Discovery().ServerVersion(); err == nil {
			status.APIServerVersion = v.GitVersion
		}
	}

	slice, err := r.ensureResourceSlice(ctx, prov, fc)
	switch {
	case apierrors.IsUnauthorized(err):
		set(ferryv1alpha1.ForeignClusterAuthenticated, false, "Unauthorized", "the provider refused the credential: "+err.Error())
		return
	case apierrors.IsForbidden(err):
		set(ferryv1alpha1.ForeignClusterAuthenticated, false, "Forbidden", "the credential may not ask for resources: "+err.Error())
		return
	case err != nil:
		set(ferryv1alpha1.ForeignClusterResourcesGranted, false, "RequestFailed", err.Error())
		return
	}
	set(ferryv1alpha1.ForeignClusterAuthenticated, true, "Accepted", "the provider accepts the credential")
	// A renewed credential reaches the virtual kubelet below, which
	// restarts it on a new credential version while the old token is still
	// valid.
	if err := r.renewCredential(ctx, fc, prov); err != nil {
		set(ferryv1alpha1.ForeignClusterAuthenticated, true, "RenewalFailed", err.Error())
	}

	granted := meta.FindStatusCondition(slice.Status.Conditions, ferryv1alpha1.ResourceSliceGranted)
	if granted == nil || granted.ObservedGeneration != slice.Generation {
		set(ferryv1alpha1.ForeignClusterResourcesGranted, false, "Pending", "waiting for the provider to grant resources")
		return
	}
	if granted.Status != metav1.ConditionTrue {
		set(ferryv1alpha1.ForeignClusterResourcesGranted, false, granted.Reason, granted.Message)
		return
	}
	classes, unoffered, leftOut := virtualNodeStorageClasses(slice.Status.StorageClasses, fc.Spec.StorageClassMap)
	msg := resourceSummary(slice.Status.Resources)
	if len(unoffered) > 0 {
		msg += "; spec.storageClassMap names classes the provider does not offer, ignored: " + someOf(unoffered)
	}
	if len(leftOut) > 0 {
		msg += fmt.Sprintf("; a virtual node holds at most %d storage classes, left out: %s", maxVirtualNodeStorageClasses, someOf(leftOut))
	}
	set(ferryv1alpha1.ForeignClusterResourcesGranted, true, "Granted", msg)

	wants := wantedVirtualNodes(fc, slice)
	if len(wants) == 0 {
		set(ferryv1alpha1.ForeignClusterVirtualNodeReady, false, "NoNodePools",
			fmt.Sprintf("no schedulable node of the provider has the label %s (spec.nodePools.labelKey)", slice.Spec.NodePools.LabelKey))
	}
	for _, want := range wants {
		vn, err := r.ensureVirtualNode(ctx, fc, want, classes)
		if err != nil {
			set(ferryv1alpha1.ForeignClusterVirtualNodeReady, false, "VirtualNodeFailed", err.Error())
			return
		}
		if err := r.launchVirtualKubelet(ctx, fc, vn); err != nil {
			set(ferryv1alpha1.ForeignClusterVirtualNodeReady, false, "VirtualKubeletFailed", err.Error())
			return
		}
	}
	if err := r.retireVirtualNodes(ctx, fc, wants); err != nil {
		set(ferryv1alpha1.ForeignClusterVirtualNodeReady, false, "VirtualNodeFailed", err.Error())
	}
}

// ensureIdentity applies a virtual kubelet's identity once per process, and
// again when its ServiceAccount is gone from the cache: four server-side
// applies every health-check round would be requests for nothing.
func (r *PeerReconciler) ensureIdentity(ctx context.Context, key types.NamespacedName) error {
	r.mu.Lock()
	done := r.identities[key]
	r.mu.Unlock()
	if done {
		err := r.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: VirtualKubeletIdentity(key.Name)}, &corev1.ServiceAccount{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("read the virtual kubelet's ServiceAccount: %w", err)
		}
	}
	if err := ensureVirtualKubeletIdentity(ctx, r.Client, key); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.identities == nil {
		r.identities = map[types.NamespacedName]bool{}
	}
	r.identities[key] = true
	return nil
}

// annotationCredentialVersion, on a VirtualNode, is the resourceVersion of
// the credentials Secret its virtual kubelet was started with.
const annotationCredentialVersion = "ferry.io/credential-version"

// launchVirtualKubelet runs the virtual kubelet of vn as its own identity.
// The virtual kubelet reads its credential only when it starts, so when the
// credentials Secret changed since (renewed by this controller, or reissued
// by an admin after a revocation), it is restarted.
func (r *PeerReconciler) launchVirtualKubelet(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, vn *ferryv1alpha1.VirtualNode) error {
	key := client.ObjectKeyFromObject(vn)
	if err := r.ensureIdentity(ctx, key); err != nil {
		return err
	}
	ref := fc.Spec.CredentialsSecretRef
	var secret corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &secret); err != nil {
		return fmt.Errorf("read credentials Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if launched := vn.Annotations[annotationCredentialVersion]; launched != secret.ResourceVersion {
		if launched != "" {
			if err := r.Launcher.Restart(ctx, key); err != nil {
				return fmt.Errorf("restart the virtual kubelet with its new credential: %w", err)
			}
			log.FromContext(ctx).Info("Restarted the virtual kubelet with its new credential", "virtualNode", key)
		}
		patch := client.MergeFrom(vn.DeepCopy())
		metav1.SetMetaDataAnnotation(&vn.ObjectMeta, annotationCredentialVersion, secret.ResourceVersion)
		if err := r.Patch(ctx, vn, patch); err != nil {
			return fmt.Errorf("record the virtual kubelet's credential version: %w", err)
		}
	}
	return r.Launcher.Ensure(ctx, key)
}

// reportVirtualNode mirrors the readiness the virtual kubelet reports on the
// VirtualNode, also while the provider is unreachable and follow stopped early.
func (r *PeerReconciler) reportVirtualNode(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, status *ferryv1alpha1.ForeignClusterStatus) {
	if fc.Spec.CredentialsSecretRef == nil {
		return
	}
	var list ferryv1alpha1.VirtualNodeList
	if err := r.List(ctx, &list, client.InNamespace(fc.Spec.CredentialsSecretRef.Namespace),
		client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(fc.Spec.ClusterID)}); err != nil {
		return
	}
	var vns []ferryv1alpha1.VirtualNode
	for _, vn := range list.Items {
		if _, retiring := vn.Annotations[annotationRetiringSince]; !retiring {
			vns = append(vns, vn)
		}
	}
	if len(vns) == 0 {
		return // not made yet, or made in this round: the next one reports it
	}
	cond := metav1.Condition{Type: ferryv1alpha1.ForeignClusterVirtualNodeReady, ObservedGeneration: fc.Generation}
	cond.Status, cond.Reason, cond.Message = virtualNodesCondition(vns)
	if c := meta.FindStatusCondition(status.Conditions, ferryv1alpha1.ForeignClusterVirtualNodeReady); c != nil && c.Reason == "VirtualKubeletFailed" {
		return // a launch failure this round says more
	}
	meta.SetStatusCondition(&status.Conditions, cond)
}

// providerClient returns the provider's clients and keeps a watch on its
// grant open with them, so following a provider at rest costs two requests a
// period and a watch.
func (r *PeerReconciler) providerClient(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) (*Provider, error) {
	p, err := r.Providers.For(ctx, fc)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.watches[fc.Name]
	if ok && w.provider == p {
		return p, nil
	}
	if ok {
		w.stop()
		delete(r.watches, fc.Name)
	}
	if r.baseCtx == nil {
		return p, nil // the manager is still starting: watch on the next round
	}
	if r.watches == nil {
		r.watches = map[string]grantWatch{}
	}
	watchCtx, stop := context.WithCancel(log.IntoContext(r.baseCtx, log.FromContext(ctx)))
	go watchGrant(watchCtx, p.Config, p.TenantNamespace, string(r.ClusterID), fc, r.wake)
	r.watches[fc.Name] = grantWatch{provider: p, stop: stop}
	return p, nil
}

func (r *PeerReconciler) forgetProvider(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.watches[name]; ok {
		w.stop()
	}
	delete(r.watches, name)
	r.Providers.Forget(name)
}

// ensureResourceSlice makes the consumer's request in its tenant namespace
// match spec.resourceRequest, writing only when it differs.
func (r *PeerReconciler) ensureResourceSlice(ctx context.Context, prov *Provider, fc *ferryv1alpha1.ForeignCluster) (*ferryv1alpha1.ResourceSlice, error) {
	var slice ferryv1alpha1.ResourceSlice
	key := types.NamespacedName{Namespace: prov.TenantNamespace, Name: string(r.ClusterID)}
	err := prov.Client.Get(ctx, key, &slice)
	if apierrors.IsNotFound(err) {
		slice = ferryv1alpha1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{ferryv1alpha1.LabelOriginCluster: string(r.ClusterID)}},
			Spec:       ferryv1alpha1.ResourceSliceSpec{ConsumerClusterID: r.ClusterID, Resources: fc.Spec.ResourceRequest, NodePools: fc.Spec.NodePools},
		}
		if err := prov.Client.Create(ctx, &slice); err != nil {
			return nil, fmt.Errorf("ask for resources (create ResourceSlice %s): %w", key, err)
		}
		log.FromContext(ctx).Info("Asked provider for resources", "provider", fc.Spec.ClusterID, "request", fc.Spec.ResourceRequest)
		return &slice, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ResourceSlice %s: %w", key, err)
	}
	if !equality.Semantic.DeepEqual(slice.Spec.Resources, fc.Spec.ResourceRequest) || !equality.Semantic.DeepEqual(slice.Spec.NodePools, fc.Spec.NodePools) {
		slice.Spec.Resources = fc.Spec.ResourceRequest
		slice.Spec.NodePools = fc.Spec.NodePools
		if err := prov.Client.Update(ctx, &slice); err != nil {
			return nil, fmt.Errorf("update ResourceSlice %s: %w", key, err)
		}
	}
	return &slice, nil
}

// ensureVirtualNode makes the VirtualNode standing for the provider match the
// grant. It lives beside the credentials Secret, which it references.
func (r *PeerReconciler) ensureVirtualNode(ctx context.Context, fc *ferryv1alpha1.ForeignCluster, want virtualNodeWant, classes []ferryv1alpha1.VirtualNodeStorageClass) (*ferryv1alpha1.VirtualNode, error) {
	vn := &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: want.name, Namespace: fc.Spec.CredentialsSecretRef.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, vn, func() error {
		vn.Labels = mergeLabels(vn.Labels, map[string]string{ferryv1alpha1.LabelClusterID: string(fc.Spec.ClusterID)})
		vn.Spec.ClusterID = fc.Spec.ClusterID
		vn.Spec.NodeName = want.name
		vn.Spec.Pool = want.pool
		vn.Spec.Resources = want.resources
		vn.Spec.NodeShapes = want.shapes
		vn.Spec.Labels = want.labels
		vn.Spec.StorageClasses = classes
		vn.Spec.Taints = withoutRetiringTaint(vn.Spec.Taints) // its pool came back
		delete(vn.Annotations, annotationRetiringSince)
		vn.Spec.KubeconfigSecretRef = corev1.LocalObjectReference{Name: fc.Spec.CredentialsSecretRef.Name}
		return controllerutil.SetControllerReference(fc, vn, r.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("ensure VirtualNode %s/%s: %w", vn.Namespace, vn.Name, err)
	}
	return vn, nil
}

// removeVirtualNode stops the virtual kubelet of a VirtualNode and removes
// its identity, the VirtualNode and its Node (whose name it shares). The
// pods still bound to the Node are left to the pod garbage collector.
func (r *PeerReconciler) removeVirtualNode(ctx context.Context, vnKey types.NamespacedName) error {
	if err := r.Launcher.Remove(ctx, vnKey); err != nil {
		return fmt.Errorf("stop virtual kubelet of %s: %w", vnKey.Name, err)
	}
	if err := removeVirtualKubeletIdentity(ctx, r.Client, vnKey); err != nil {
		return fmt.Errorf("remove the identity of the virtual kubelet of %s: %w", vnKey.Name, err)
	}
	r.mu.Lock()
	delete(r.identities, vnKey)
	r.mu.Unlock()
	if err := r.Delete(ctx, &ferryv1alpha1.VirtualNode{ObjectMeta: metav1.ObjectMeta{Name: vnKey.Name, Namespace: vnKey.Namespace}}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete VirtualNode %s: %w", vnKey, err)
	}
	if err := r.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: vnKey.Name}}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete virtual node %s: %w", vnKey.Name, err)
	}
	return nil
}

// maxVirtualNodeStorageClasses is VirtualNode spec.storageClasses' MaxItems.
const maxVirtualNodeStorageClasses = 64

// virtualNodeStorageClasses are the classes claims may ask for on the
// provider's virtual node: each class the provider offers, under its own
// name; named "", the provider's default class, which serves claims asking
// for this cluster's default; and each spec.storageClassMap entry (this
// cluster's name → the provider's) whose provider class is offered, which
// replaces the entry of the same local name ("" included). Sorted by name,
// at most maxVirtualNodeStorageClasses: leftOut names the ones beyond (the
// last by name), so the VirtualNode stays valid. unoffered lists, sorted,
// the map entries naming a class the provider does not offer, as
// local=provider: a class is never silently replaced by another.
func virtualNodeStorageClasses(offers []ferryv1alpha1.StorageClassOffer, classMap map[string]string) (classes []ferryv1alpha1.VirtualNodeStorageClass, unoffered, leftOut []string) {
	byName := map[string]ferryv1alpha1.VirtualNodeStorageClass{}
	offered := map[string]bool{}
	for _, o := range offers {
		byName[o.Name] = ferryv1alpha1.VirtualNodeStorageClass{Name: o.Name, ProviderClass: o.Name}
		offered[o.Name] = true
		if o.Default {
			byName[""] = ferryv1alpha1.VirtualNodeStorageClass{Name: "", ProviderClass: o.Name}
		}
	}
	for local, remote := range classMap {
		if !offered[remote] {
			unoffered = append(unoffered, fmt.Sprintf("%s=%s", quoteEmpty(local), remote))
			continue
		}
		byName[local] = ferryv1alpha1.VirtualNodeStorageClass{Name: local, ProviderClass: remote}
	}
	for _, c := range byName {
		classes = append(classes, c)
	}
	slices.SortFunc(classes, func(a, b ferryv1alpha1.VirtualNodeStorageClass) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(unoffered)
	if len(classes) > maxVirtualNodeStorageClasses {
		for _, c := range classes[maxVirtualNodeStorageClasses:] {
			leftOut = append(leftOut, c.Name)
		}
		classes = classes[:maxVirtualNodeStorageClasses]
	}
	return classes, unoffered, leftOut
}

// quoteEmpty shows the class name "" (the default) in a message.
func quoteEmpty(class string) string {
	if class == "" {
		return `""`
	}
	return class
}

// someOf lists names in a condition message, the first few only: a
// condition's message is bounded (32768 bytes) and class names are long.
func someOf(names []string) string {
	const shown = 8
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// unpeer removes, in order, the virtual kubelet, the VirtualNode and its
// Node, the request on the provider (best effort: the provider removes its
// tenant on its own) and the credential ferryctl stored, then lets the
// ForeignCluster go. Every step tolerates having been done already.
func (r *PeerReconciler) unpeer(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) error {
	if !controllerutil.ContainsFinalizer(fc, PeerFinalizer) {
		return nil
	}
	logger := log.FromContext(ctx).WithValues("provider", fc.Spec.ClusterID)
	ns := ferryv1alpha1.SystemNamespace
	if fc.Spec.CredentialsSecretRef != nil {
		ns = fc.Spec.CredentialsSecretRef.Namespace
	}
	names := map[string]bool{VirtualNodeName(fc.Spec.ClusterID): true}
	var vns ferryv1alpha1.VirtualNodeList
	if err := r.List(ctx, &vns, client.InNamespace(ns), client.MatchingLabels{ferryv1alpha1.LabelClusterID: string(fc.Spec.ClusterID)}); err != nil {
		return fmt.Errorf("list the provider's VirtualNodes: %w", err)
	}
	for i := range vns.Items {
		names[vns.Items[i].Name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if err := r.removeVirtualNode(ctx, types.NamespacedName{Namespace: ns, Name: name}); err != nil {
			return err
		}
	}
	if prov, err := r.providerClient(ctx, fc); err == nil {
		slice := &ferryv1alpha1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: string(r.ClusterID), Namespace: prov.TenantNamespace}}
		delCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := prov.Client.Delete(delCtx, slice); client.IgnoreNotFound(err) != nil {
			logger.Info("Could not delete the ResourceSlice on the provider; its tenant removal will", "error", err.Error())
		}
		cancel()
	}
	if ref := fc.Spec.CredentialsSecretRef; ref != nil {
		var secret corev1.Secret
		err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &secret)
		if err == nil && secret.Labels[ferryv1alpha1.LabelOriginCluster] == string(fc.Spec.ClusterID) {
			if err := r.Delete(ctx, &secret); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete credentials Secret: %w", err)
			}
		} else if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("read credentials Secret: %w", err)
		}
	}
	r.forgetProvider(fc.Name)
	if fc.DeletionTimestamp.IsZero() {
		// No longer a provider, the peer stays a consumer (peered both ways,
		// now one way): what this controller told of it is gone with the
		// virtual node, and the tenant controller tells the rest.
		if err := r.forgetProviderStatus(ctx, fc); err != nil {
			return err
		}
	}
	logger.Info("Unpeered")
	controllerutil.RemoveFinalizer(fc, PeerFinalizer)
	return r.Update(ctx, fc)
}

// forgetProviderStatus removes from the status of a ForeignCluster that is
// no longer a provider what this controller reported of it as one.
func (r *PeerReconciler) forgetProviderStatus(ctx context.Context, fc *ferryv1alpha1.ForeignCluster) error {
	status := fc.Status.DeepCopy()
	for _, t := range []string{ferryv1alpha1.ForeignClusterAPIServerReady, ferryv1alpha1.ForeignClusterAuthenticated,
		ferryv1alpha1.ForeignClusterResourcesGranted, ferryv1alpha1.ForeignClusterVirtualNodeReady} {
		meta.RemoveStatusCondition(&status.Conditions, t)
	}
	status.RemoteTenantNamespace, status.APIServerVersion = "", ""
	return updateStatusIfChanged(ctx, r.Client, fc, status)
}

// updateStatusIfChanged writes status as fc's, only when it differs.
func updateStatusIfChanged(ctx context.Context, c client.Client, fc *ferryv1alpha1.ForeignCluster, status *ferryv1alpha1.ForeignClusterStatus) error {
	if equality.Semantic.DeepEqual(status, &fc.Status) {
		return nil
	}
	fc.Status = *status
	if err := c.Status().Update(ctx, fc); err != nil {
		return fmt.Errorf("update status of %s: %w", fc.Name, err)
	}
	return nil
}

func resourceSummary(res corev1.ResourceList) string {
	cpu, mem, pods := res[corev1.ResourceCPU], res[corev1.ResourceMemory], res[corev1.ResourcePods]
	return fmt.Sprintf("cpu %s, memory %s, pods %s", cpu.String(), mem.String(), pods.String())
}

// SetupWithManager registers the reconciler; a VirtualNode's status change
// (its node turning Ready or NotReady) re-reconciles its ForeignCluster.
func (r *PeerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Providers == nil {
		r.Providers = NewProviderClients(mgr.GetClient(), 20, 40)
	}
	r.wake = make(chan event.GenericEvent, 64)
	if err := mgr.Add(&grantWatches{r: r}); err != nil {
		return fmt.Errorf("add grant watches: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("peer").
		For(&ferryv1alpha1.ForeignCluster{}).
		Owns(&ferryv1alpha1.VirtualNode{}).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// grantWatches hands the manager's context to the grant watches and stops
// them all when the manager stops. It runs on every replica, before the
// controllers start.
type grantWatches struct{ r *PeerReconciler }

func (g *grantWatches) NeedLeaderElection() bool { return false }

func (g *grantWatches) Start(ctx context.Context) error {
	g.r.mu.Lock()
	g.r.baseCtx = ctx
	g.r.mu.Unlock()
	<-ctx.Done()
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	for name, w := range g.r.watches {
		w.stop()
		delete(g.r.watches, name)
	}
	return nil
}
