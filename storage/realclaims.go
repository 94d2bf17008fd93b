package storage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// RealClaimCollector deletes the real claims of the storage namespace that
// nothing will ever use: made for a user's claim that was deleted (or
// recreated under its name) before its volume was stored. A real claim with
// a volume of the virtual class standing for it is that volume's to release
// (the provisioner's Delete), and one whose user claim still waits is
// provisioning: both are left alone.
type RealClaimCollector struct {
	Client    client.Client
	Namespace string
	// Grace is how long a real claim without a volume is left alone after
	// its creation (1m when zero): the provisioner stores the volume once
	// the real one is bound.
	Grace time.Duration
}

// Reconcile looks at one real claim.
func (r *RealClaimCollector) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	grace := r.Grace
	if grace == 0 {
		grace = time.Minute
	}
	real := &corev1.PersistentVolumeClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, real); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !madeByStorage(real) || !real.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	// The volume standing for the user's claim has the real claim's name.
	if err := r.Client.Get(ctx, types.NamespacedName{Name: real.Name}, &corev1.PersistentVolume{}); err == nil {
		return ctrl.Result{}, nil
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("read volume %s: %w", real.Name, err)
	}
	if age := time.Since(real.CreationTimestamp.Time); age < grace {
		return ctrl.Result{RequeueAfter: grace - age}, nil
	}
	if live, err := originLive(ctx, r.Client, real); err != nil {
		return ctrl.Result{}, err
	} else if live {
		// Still provisioning (the real volume may be slow to come).
		return ctrl.Result{RequeueAfter: grace}, nil
	}
	if err := r.Client.Delete(ctx, real, client.Preconditions{UID: &real.UID}); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete claim %s of a claim that is gone: %w", req, err)
	}
	log.FromContext(ctx).Info("deleted a real claim whose user claim is gone before its volume was stored", "claim", req,
		"userClaim", real.Labels[ferryv1alpha1.LabelOriginNamespace]+"/"+real.Labels[ferryv1alpha1.LabelOriginName])
	return ctrl.Result{}, nil
}

// SetupWithManager watches the claims of the storage namespace.
func (r *RealClaimCollector) SetupWithManager(mgr ctrl.Manager) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == r.Namespace })
	return ctrl.NewControllerManagedBy(mgr).
		Named("ferry-real-claims").
		For(&corev1.PersistentVolumeClaim{}, builder.WithPredicates(inNamespace)).
		Complete(r)
}
