package offload

import (
	"context"
	"errors"
	"path/filepath"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
	"github.com/ferry-io/ferry/test/testbed"
)

// peeredBed is a consumer and its providers, each with ferry's base
// manifests and ferry-controller-manager as a process, every provider peered
// (the scale run's and the restarts' start).
type peeredBed struct {
	consumer    *testbed.Cluster
	providers   []*testbed.Cluster
	consumerCM  *ferryProcess
	providerCMs []*ferryProcess
	ids         []ferryv1alpha1.ClusterID // the providers'
	closers     []func() error
}

// startPeeredBed starts clusterOpts (the consumer first), installs ferry's
// base manifests, builds and starts ferry-controller-manager in each, binds
// each provider's ferry-reflection-reader to the consumer when clusterRead,
// and peers every provider. stop ends all it started, also on error.
func startPeeredBed(ctx context.Context, root string, clusterOpts []testbed.Options, clusterRead bool, say func(string, ...any)) (b *peeredBed, err error) {
	b = &peeredBed{}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.stop())
		}
	}()
	clusters, err := testbed.StartClusters(ctx, clusterOpts...)
	if err != nil {
		return b, err
	}
	b.consumer, b.providers = clusters[0], clusters[1:]
	b.closers = append(b.closers, func() error {
		var err error
		for _, c := range clusters {
			err = errors.Join(err, c.Stop())
		}
		return err
	})
	for _, c := range clusters {
		if err := c.ApplyKustomization(ctx, filepath.Join(root, "manifests", "base")); err != nil {
			return b, err
		}
	}
	say("building ferry-controller-manager and ferry-virtual-kubelet")
	bins, removeBins, err := buildFerryBinaries(ctx, root)
	if err != nil {
		return b, err
	}
	b.closers = append(b.closers, func() error { removeBins(); return nil })
	if b.consumerCM, err = startFerryProcess(ctx, b.consumer, consumerID, bins); err != nil {
		return b, err
	}
	b.closers = append(b.closers, b.consumerCM.Stop)
	for i, p := range b.providers {
		id := scaleProviderID(i + 1)
		cm, err := startFerryProcess(ctx, p, id, bins)
		if err != nil {
			return b, err
		}
		b.ids, b.providerCMs = append(b.ids, id), append(b.providerCMs, cm)
		b.closers = append(b.closers, cm.Stop)
		if clusterRead {
			if err := grantClusterRead(ctx, p); err != nil {
				return b, err
			}
		}
		say("peering with %s", id)
		if err := peer(ctx, b.consumer, p); err != nil {
			return b, err
		}
	}
	return b, nil
}

// stop ends what startPeeredBed started, the last started first.
func (b *peeredBed) stop() error {
	var err error
	for i := len(b.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, b.closers[i]())
	}
	b.closers = nil
	return err
}
