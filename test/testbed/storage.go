package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	ferrystorage "github.com/ferry-io/ferry/storage"
	"github.com/ferry-io/ferry/test/testbed/hostpath"
)

// The storage of a cluster started with Options.Storage: two classes served
// by an in-process hostpath provisioner.
const (
	// StorageClassStandard is the default class: a claim without a class
	// gets it, as on most real clusters.
	StorageClassStandard = "standard"
	// StorageClassFast holds at most FastCapacityPerNode on each node, so a
	// test can run a node out of it and see the claim handed back to the
	// scheduler.
	StorageClassFast = "fast"
	// FastCapacityPerNode is what StorageClassFast can provision on one node.
	FastCapacityPerNode = "10Gi"
	// StorageProvisioner is the provisioner both classes name.
	StorageProvisioner = "testbed.ferry.io/hostpath"
	// VolumesDir is, in a cluster's Dir, where each volume is a directory
	// named after the PersistentVolume.
	VolumesDir = "volumes"
)

// storageLog is, in a cluster's Dir, the in-process provisioner's log.
const storageLog = "hostpath-provisioner.log"

// storageClasses are the classes of a cluster with Options.Storage. Both
// wait for the first consumer, so a volume is made on the node its first
// pod is scheduled to, as node-local storage must be.
func storageClasses() []*storagev1.StorageClass {
	class := func(name string, params map[string]string, annotations map[string]string) *storagev1.StorageClass {
		return &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: name, Annotations: annotations},
			Provisioner:       StorageProvisioner,
			Parameters:        params,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
			// Claims may grow: the provisioner's Resizer expands them as a
			// CSI external-resizer does (a class of the fast kind only
			// while its node has room).
			AllowVolumeExpansion: ptr.To(true),
		}
	}
	return []*storagev1.StorageClass{
		class(StorageClassStandard, nil, map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}),
		class(StorageClassFast, map[string]string{hostpath.ParameterCapacity: FastCapacityPerNode}, nil),
	}
}

// storage is a cluster's running provisioner.
type storage struct {
	cancel    context.CancelFunc
	informers informers.SharedInformerFactory
	done      chan struct{} // closed once the controller and its workers returned
	log       *os.File
	logPath   string
	events    record.EventBroadcaster
}

// startStorage creates the storage classes and runs sig-storage-lib-external-
// provisioner's controller with a hostpath.Provisioner for this cluster, with
// its own client, informers and event recorder, and returns once it watches
// claims, volumes and classes. Stop ends it.
func (c *Cluster) startStorage(ctx context.Context) error {
	for _, class := range storageClasses() {
		if _, err := c.Kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster %s: create StorageClass %s: %w", c.Name, class.Name, err)
		}
	}
	provisioner, err := hostpath.New(filepath.Join(c.Dir, VolumesDir))
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	config := rest.CopyConfig(c.Config)
	config.UserAgent = "testbed-hostpath-provisioner"
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return fmt.Errorf("cluster %s: build the provisioner's clientset: %w", c.Name, err)
	}
	logPath := filepath.Join(c.Dir, storageLog)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cluster %s: open the provisioner's log: %w", c.Name, err)
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(logFile), textlogger.Verbosity(2)))
	// The controller lives as long as the cluster, not as Start's context.
	runCtx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	s := &storage{
		cancel:    cancel,
		informers: informers.NewSharedInformerFactory(kube, controller.DefaultResyncPeriod),
		done:      make(chan struct{}),
		log:       logFile,
		logPath:   logPath,
	}
	c.storage = s
	claims := s.informers.Core().V1().PersistentVolumeClaims().Informer()
	volumes := s.informers.Core().V1().PersistentVolumes().Informer()
	classes := s.informers.Storage().V1().StorageClasses().Informer()

	// Through ferry's serialized constructor: the library writes client-go's
	// global scheme, which ferry's own provisioners in this process also do.
	pc := ferrystorage.NewProvisionController(runCtx, kube, StorageProvisioner, provisioner,
		controller.LeaderElection(false), // one provisioner per cluster
		controller.MetricsPort(0),        // no metrics server: it would listen on 0.0.0.0
		// The lib's default backs off from 15 s, longer than a test waits.
		controller.RateLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second)),
		// Informers of our own, so Start can wait until they have synced.
		controller.ClaimsInformer(claims),
		controller.VolumesInformer(volumes),
		controller.ClassesInformer(classes),
	)
	var workers sync.WaitGroup
	pc.ControllerWaitGroup(&workers)
	s.events = record.NewBroadcaster(record.WithContext(runCtx))
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := s.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "testbed-hostpath-resizer"})
	resizer, err := hostpath.NewResizer(kube, StorageProvisioner, provisioner, s.informers, recorder)
	if err != nil {
		close(s.done) // nothing runs: stop returns at once
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	s.informers.Start(runCtx.Done())
	workers.Go(func() { resizer.Run(runCtx, 2) })
	go func() {
		defer close(s.done)
		pc.Run(runCtx)
		workers.Wait()
	}()

	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), claims.HasSynced, volumes.HasSynced, classes.HasSynced) {
		return fmt.Errorf("cluster %s: the provisioner's informers did not sync: %w", c.Name, syncCtx.Err())
	}
	return nil
}

// stop ends the provisioner and waits for its goroutines, then closes its log.
func (s *storage) stop() {
	s.cancel()
	<-s.done
	s.events.Shutdown()
	s.informers.Shutdown()
	_ = s.log.Close()
}
