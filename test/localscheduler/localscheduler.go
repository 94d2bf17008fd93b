// Package localscheduler runs ferry-scheduler in-process for a test-bed
// cluster: kube-scheduler's own setup (app.Setup) from a
// KubeSchedulerConfiguration file, with ferry's plugins registered, and the
// scheduling loop run until stopped. No serving endpoints and no leader
// election: tests talk to the API server only.
package localscheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"

	"github.com/ferry-io/ferry/plugins/registry"
)

// Scheduler is a running in-process scheduler.
type Scheduler struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start runs the scheduler the KubeSchedulerConfiguration at configFile
// describes (e.g. manifests/scheduler/config.yaml) against the cluster of
// kubeconfig, until Stop or ctx ends. The configuration is copied into dir
// by WriteConfig. Start returns once the scheduler's informers have synced.
func Start(ctx context.Context, configFile, kubeconfig, dir string) (*Scheduler, error) {
	path, err := WriteConfig(configFile, kubeconfig, dir)
	if err != nil {
		return nil, err
	}

	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.SecureServing.BindPort = 0 // no endpoints
	if err := opts.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, fmt.Errorf("scheduler feature gates: %w", err)
	}
	var regOpts []app.Option
	for name, factory := range registry.Registry() {
		regOpts = append(regOpts, app.WithPlugin(name, factory))
	}
	runCtx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(runCtx, opts, regOpts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("set up scheduler: %w", err)
	}
	cc.EventBroadcaster.StartRecordingToSink(runCtx.Done())
	cc.InformerFactory.Start(runCtx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(runCtx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(runCtx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.WaitForCacheSync(runCtx.Done())
	}
	if err := sched.WaitForHandlersSync(runCtx); err != nil {
		cancel()
		return nil, fmt.Errorf("scheduler handlers: %w", err)
	}
	s := &Scheduler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer cc.EventBroadcaster.Shutdown()
		sched.Run(runCtx)
	}()
	return s, nil
}

// Stop ends the scheduler and waits for its loop to return.
func (s *Scheduler) Stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
}

// WriteConfig copies the KubeSchedulerConfiguration at configFile into dir
// (as ferry-scheduler-config.yaml) with its client connection pointed at
// kubeconfig and leader election off, and returns the copy's path: what
// ferry-scheduler's --config takes to run outside a cluster.
func WriteConfig(configFile, kubeconfig, dir string) (string, error) {
	raw, err := os.ReadFile(configFile)
	if err != nil {
		return "", fmt.Errorf("read scheduler configuration: %w", err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("parse scheduler configuration %s: %w", configFile, err)
	}
	u := unstructured.Unstructured{Object: cfg}
	if err := unstructured.SetNestedField(u.Object, kubeconfig, "clientConnection", "kubeconfig"); err != nil {
		return "", fmt.Errorf("scheduler configuration %s: clientConnection.kubeconfig: %w", configFile, err)
	}
	if err := unstructured.SetNestedField(u.Object, false, "leaderElection", "leaderElect"); err != nil {
		return "", fmt.Errorf("scheduler configuration %s: leaderElection.leaderElect: %w", configFile, err)
	}
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "ferry-scheduler-config.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		return "", fmt.Errorf("write scheduler configuration: %w", err)
	}
	return path, nil
}
