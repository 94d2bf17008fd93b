package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/ferry-io/ferry/api/placement"
	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// ErrNotPeered says this cluster no longer peers with a provider: the
// provider removes the consumer's tenant and twin namespaces, and the
// claims in them, on its own.
var ErrNotPeered = errors.New("not peered")

// Providers hands out clients for the providers this cluster peers with,
// with the consumer's credential (its tenant and twin namespaces).
type Providers interface {
	// Client is provider id's client, or an error wrapping ErrNotPeered.
	Client(ctx context.Context, id ferryv1alpha1.ClusterID) (client.Client, error)
}

// Options configure the storage fabric of one cluster.
type Options struct {
	// ClusterID of this cluster, on the claims made for its own.
	ClusterID ferryv1alpha1.ClusterID
	// Namespace holds the claims of real classes made for claims bound on
	// this cluster's real nodes.
	Namespace string
	// Providers gives access to the peered providers.
	Providers Providers
	// BindWait is how long one provisioning attempt waits for a real
	// claim's volume before handing the claim back to the work queue (10s
	// when zero).
	BindWait time.Duration
	// Workers is how many claims are provisioned or deleted at once (16
	// when zero).
	Workers int
}

// Provisioner provisions the claims of the virtual class, in this cluster
// or in a provider, by the node the scheduler picked for their first pod.
type Provisioner struct {
	client   client.Client
	recorder events.EventRecorder
	opts     Options
	attempts attempts
}

var _ controller.Provisioner = &Provisioner{}

// NewProvisioner returns a Provisioner that reads this cluster through c
// (a cached client) and records events on claims with recorder.
func NewProvisioner(c client.Client, recorder events.EventRecorder, opts Options) *Provisioner {
	if opts.BindWait == 0 {
		opts.BindWait = 10 * time.Second
	}
	return &Provisioner{client: c, recorder: recorder, opts: opts}
}

// Provision implements controller.Provisioner. Each attempt is counted in
// the storage fabric's metrics.
func (p *Provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	start := time.Now()
	pv, where, state, err := p.provision(ctx, o)
	p.attempts.observe(o.PVC.UID, string(where), start, state, err)
	return pv, state, err
}

// provision provisions o's claim; where is the cluster asked (empty when
// none was chosen).
func (p *Provisioner) provision(ctx context.Context, o controller.ProvisionOptions) (*corev1.PersistentVolume, ferryv1alpha1.ClusterID, controller.ProvisioningState, error) {
	pvc := o.PVC
	if err := errClaimNotSupported(pvc); err != nil {
		return nil, "", controller.ProvisioningFinished, because(ReasonUnsupported, fmt.Errorf("claim %s/%s: %w", pvc.Namespace, pvc.Name, err))
	}
	if o.SelectedNodeName == "" {
		return nil, "", controller.ProvisioningFinished, because(ReasonUnsupported, fmt.Errorf("storage class %s: volumeBindingMode must be WaitForFirstConsumer: the claim is provisioned where its first pod is scheduled", o.StorageClass.Name))
	}
	var node corev1.Node
	if err := p.client.Get(ctx, types.NamespacedName{Name: o.SelectedNodeName}, &node); apierrors.IsNotFound(err) {
		return nil, "", controller.ProvisioningReschedule, because(ReasonNodeGone, fmt.Errorf("selected node %s is gone", o.SelectedNodeName))
	} else if err != nil {
		return nil, "", controller.ProvisioningNoChange, fmt.Errorf("read node %s: %w", o.SelectedNodeName, err)
	}
	var (
		pv    *corev1.PersistentVolume
		state controller.ProvisioningState
		err   error
		where ferryv1alpha1.ClusterID
	)
	if placement.IsVirtualNode(&node) {
		where = placement.NodeCluster(&node)
		pv, state, err = p.provisionRemote(ctx, o, &node)
	} else {
		where = p.opts.ClusterID
		pv, state, err = p.provisionReal(ctx, o, &node)
	}
	if err != nil {
		return nil, where, state, err
	}
	// A claim held by a provider is labelled by the remote volume
	// controller once bound: a write of the claim here, just before
	// kube-controller-manager binds it, only delays the binding.
	if where == p.opts.ClusterID {
		if err := labelClaim(ctx, p.client, pvc, where); err != nil {
			return nil, where, controller.ProvisioningInBackground, err
		}
	}
	return pv, where, controller.ProvisioningFinished, nil
}

// labelClaim marks the user's claim with the cluster holding its data, so
// `kubectl get pvc -L ferry.io/cluster-id` shows it.
func labelClaim(ctx context.Context, c client.Client, pvc *corev1.PersistentVolumeClaim, where ferryv1alpha1.ClusterID) error {
	if pvc.Labels[ferryv1alpha1.LabelClusterID] == string(where) {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, ferryv1alpha1.LabelClusterID, where))
	if err := c.Patch(ctx, pvc.DeepCopy(), patch); err != nil {
		return fmt.Errorf("label claim %s/%s with %s=%s: %w", pvc.Namespace, pvc.Name, ferryv1alpha1.LabelClusterID, where, err)
	}
	return nil
}

// Delete implements controller.Provisioner: it deletes the claim holding
// the volume's data, in the storage namespace or in the provider.
func (p *Provisioner) Delete(ctx context.Context, pv *corev1.PersistentVolume) error {
	if ref, ok := remoteRefOf(pv); ok {
		return p.deleteRemote(ctx, pv, ref)
	}
	if ns, name, ok := backingClaimOf(pv); ok {
		return p.deleteReal(ctx, pv, ns, name)
	}
	return &controller.IgnoredError{Reason: fmt.Sprintf("volume %s was not made by ferry's storage fabric", pv.Name)}
}

// event records a Normal event on the user's claim.
func (p *Provisioner) event(ctx context.Context, pvc *corev1.PersistentVolumeClaim, reason, note string, args ...any) {
	if p.recorder != nil {
		p.recorder.Eventf(pvc, nil, corev1.EventTypeNormal, reason, "Provision", note, args...)
	}
	log.FromContext(ctx).Info(fmt.Sprintf(note, args...), "claim", client.ObjectKeyFromObject(pvc), "reason", reason)
}
