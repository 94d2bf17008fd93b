package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// RemoteClaimCollector deletes, in the providers' twin namespaces, the
// claims the storage fabric made for a user's claim that was deleted (or
// recreated under its name) before its volume was stored: no volume stands
// for them, so no Delete would ever come. It looks every Interval, through
// the twin namespaces this cluster's NamespaceOffloadings report; a provider
// it cannot reach is left as it is until the next look.
type RemoteClaimCollector struct {
	Client    client.Client
	Providers Providers
	ClusterID ferryv1alpha1.ClusterID
	// Interval between looks (5m when zero).
	Interval time.Duration
	// Grace is how old a provider claim must be to be collected (1m when
	// zero): younger ones may be provisioning.
	Grace time.Duration
}

// Start implements manager.Runnable: it collects until ctx ends.
func (r *RemoteClaimCollector) Start(ctx context.Context) error {
	interval := r.Interval
	if interval == 0 {
		interval = 5 * time.Minute
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := r.collect(ctx); err != nil {
			log.FromContext(ctx).Error(err, "collect provider claims nothing stands for")
		}
	}, interval)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (r *RemoteClaimCollector) NeedLeaderElection() bool { return true }

// collect looks once at every twin namespace.
func (r *RemoteClaimCollector) collect(ctx context.Context) error {
	var nsos ferryv1alpha1.NamespaceOffloadingList
	if err := r.Client.List(ctx, &nsos); err != nil {
		return fmt.Errorf("list NamespaceOffloadings: %w", err)
	}
	var pvs corev1.PersistentVolumeList
	if err := r.Client.List(ctx, &pvs); err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	standing := map[remoteRef]bool{}
	for i := range pvs.Items {
		if ref, ok := remoteRefOf(&pvs.Items[i]); ok {
			standing[ref] = true
		}
	}
	var errs []error
	for _, nso := range nsos.Items {
		for _, c := range nso.Status.Clusters {
			if c.TwinNamespace == "" {
				continue
			}
			if err := r.collectIn(ctx, c.ClusterID, c.TwinNamespace, standing); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// collectIn deletes the claims of one twin namespace that stand for no
// live claim and that no volume stands for.
func (r *RemoteClaimCollector) collectIn(ctx context.Context, cluster ferryv1alpha1.ClusterID, twin string, standing map[remoteRef]bool) error {
	grace := r.Grace
	if grace == 0 {
		grace = time.Minute
	}
	c, err := r.Providers.Client(ctx, cluster)
	if errors.Is(err, ErrNotPeered) {
		return nil
	} else if err != nil {
		return err
	}
	var claims corev1.PersistentVolumeClaimList
	if err := c.List(ctx, &claims, client.InNamespace(twin), client.MatchingLabels{
		ferryv1alpha1.LabelManagedBy: ferryv1alpha1.ManagedByStorage, ferryv1alpha1.LabelOriginCluster: string(r.ClusterID),
	}); err != nil {
		return fmt.Errorf("list claims of %s in cluster %s: %w", twin, cluster, err)
	}
	for i := range claims.Items {
		remote := &claims.Items[i]
		if standing[remoteRef{Cluster: cluster, Namespace: twin, Name: remote.Name}] || time.Since(remote.CreationTimestamp.Time) < grace || !remote.DeletionTimestamp.IsZero() {
			continue
		}
		if live, err := originLive(ctx, r.Client, remote); err != nil {
			return err
		} else if live {
			continue // still provisioning, or its volume is not in the cache yet
		}
		if err := c.Delete(ctx, remote, client.Preconditions{UID: &remote.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete claim %s/%s in cluster %s: %w", twin, remote.Name, cluster, err)
		}
		log.FromContext(ctx).Info("deleted a provider claim whose claim is gone before its volume was stored", "cluster", cluster, "claim", twin+"/"+remote.Name)
	}
	return nil
}
