package storage

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/ephemeral"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Reasons a provisioning attempt fails, the reason label of
// ferry_storage_provisioning_failures_total.
const (
	// ReasonClassNotOffered: the cluster has no class serving the one the
	// claim asked for.
	ReasonClassNotOffered = "ClassNotOffered"
	// ReasonNotOffloaded: the claim's namespace is not offloaded to the
	// provider its pod was scheduled to.
	ReasonNotOffloaded = "NotOffloaded"
	// ReasonTwinNotReady: the namespace's twin in the provider is not Ready
	// yet (retried).
	ReasonTwinNotReady = "TwinNotReady"
	// ReasonNotPeered: the provider is no longer peered.
	ReasonNotPeered = "NotPeered"
	// ReasonRefused: the provider's API server refused the claim (quota,
	// admission, validation).
	ReasonRefused = "Refused"
	// ReasonConflict: a claim of that name exists and was not made by ferry
	// for this one.
	ReasonConflict = "Conflict"
	// ReasonNodeGone: the node the scheduler picked is gone.
	ReasonNodeGone = "NodeGone"
	// ReasonProvisionerRefused: the real class's provisioner handed its
	// claim back (it cannot provision on that node).
	ReasonProvisionerRefused = "ProvisionerRefused"
	// ReasonUnsupported: the claim or the class asks for what the virtual
	// class does not do (a selector, a data source, Immediate binding).
	ReasonUnsupported = "Unsupported"
	// ReasonAPIError: reading or writing an API server failed (retried).
	ReasonAPIError = "APIError"
	// reasonWaiting: a real claim is not bound yet; the attempt is retried
	// and is no failure.
	reasonWaiting = "Waiting"
)

// failure is a provisioning error with the reason it is counted under.
type failure struct {
	reason string
	err    error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// because marks err as a failure for reason.
func because(reason string, err error) error { return &failure{reason: reason, err: err} }

// failureReason is the reason err is counted under.
func failureReason(err error) string {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f.reason
	case errors.Is(err, ErrNotPeered):
		return ReasonNotPeered
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		return ReasonRefused
	default:
		return ReasonAPIError
	}
}

var (
	provisioningDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ferry_storage_provisioning_duration_seconds",
		Help: "Time from the first attempt to provision a claim of the virtual class to its volume, by the cluster holding the data.",
		// From a provider claim made at once (tens of ms) to a real volume
		// its provisioner takes minutes to make.
		Buckets: prometheus.ExponentialBuckets(0.025, 2, 14),
	}, []string{"cluster"})
	provisioningFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ferry_storage_provisioning_failures_total",
		Help: "Failed attempts to provision a claim of the virtual class, by the cluster asked and the reason.",
	}, []string{"cluster", "reason"})
)

func init() {
	ctrlmetrics.Registry.MustRegister(provisioningDuration, provisioningFailures)
}

// attempts remembers when provisioning of each claim was first tried, for
// ferry_storage_provisioning_duration_seconds.
type attempts struct {
	mu    sync.Mutex
	first map[types.UID]time.Time
}

// observe records one Provision call for claim uid that started at start,
// asked cluster (empty when no cluster was chosen), and ended in state and
// err.
func (a *attempts) observe(uid types.UID, cluster string, start time.Time, state controller.ProvisioningState, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first == nil {
		a.first = map[types.UID]time.Time{}
	}
	first, ok := a.first[uid]
	if !ok {
		first = start
	}
	if err != nil {
		if reason := failureReason(err); reason != reasonWaiting {
			provisioningFailures.WithLabelValues(cluster, reason).Inc()
		}
	}
	switch {
	case err == nil && state == controller.ProvisioningFinished:
		provisioningDuration.WithLabelValues(cluster).Observe(time.Since(first).Seconds())
		delete(a.first, uid)
	case state == controller.ProvisioningFinished || state == controller.ProvisioningReschedule:
		// Given up, or handed back to the scheduler: the next attempt
		// starts over (maybe elsewhere).
		delete(a.first, uid)
	default:
		a.first[uid] = first
	}
}

// ClaimsCollector exports, at each scrape, from the manager's cache (no
// API request), the claims of the virtual class by cluster holding their
// data and phase, and since when each Pending claim a pod waits for has been
// waiting.
type ClaimsCollector struct {
	Reader client.Reader
}

var (
	claimsDesc = prometheus.NewDesc("ferry_storage_claims",
		"Claims of ferry's virtual storage class, by the cluster holding their data (label ferry.io/cluster-id; empty before provisioning) and phase.",
		[]string{"cluster", "phase"}, nil)
	pendingSinceDesc = prometheus.NewDesc("ferry_storage_claim_pending_since_timestamp_seconds",
		"For each Pending claim of ferry's virtual storage class that a pod waits for: since when (the later of the claim's and its oldest waiting pod's creation), in Unix seconds.",
		[]string{"namespace", "claim"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("ferry_storage_claims_scrape_error",
		"1 when the claims could not be read from the cache at the last scrape.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *ClaimsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- claimsDesc
	ch <- pendingSinceDesc
	ch <- scrapeErrorsDesc
}

// Collect implements prometheus.Collector.
func (c *ClaimsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	claims, pendingSince, err := c.read(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.GaugeValue, failed)
	if err != nil {
		return
	}
	for k, n := range claims {
		ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(n), k.cluster, k.phase)
	}
	for k, since := range pendingSince {
		ch <- prometheus.MustNewConstMetric(pendingSinceDesc, prometheus.GaugeValue, float64(since.Unix()), k.Namespace, k.Name)
	}
}

// registerClaimsCollector adds c to controller-runtime's registry (served
// on the metrics address); a second storage fabric in one process (the test
// bed runs several clusters in one) keeps the first's.
func registerClaimsCollector(c *ClaimsCollector) error {
	if err := ctrlmetrics.Registry.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			return nil
		}
		return err
	}
	return nil
}

type claimsKey struct{ cluster, phase string }

// read counts the virtual class's claims and finds the Pending ones pods
// wait for.
func (c *ClaimsCollector) read(ctx context.Context) (map[claimsKey]int, map[types.NamespacedName]time.Time, error) {
	var classes storagev1.StorageClassList
	if err := c.Reader.List(ctx, &classes); err != nil {
		return nil, nil, err
	}
	virtual := map[string]bool{}
	for _, sc := range classes.Items {
		if sc.Provisioner == ferryv1alpha1.ProvisionerVirtual {
			virtual[sc.Name] = true
		}
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := c.Reader.List(ctx, &pvcs); err != nil {
		return nil, nil, err
	}
	claims := map[claimsKey]int{}
	pending := map[types.NamespacedName]time.Time{}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if pvc.Spec.StorageClassName == nil || !virtual[*pvc.Spec.StorageClassName] {
			continue
		}
		phase := string(pvc.Status.Phase)
		if phase == "" {
			phase = string(corev1.ClaimPending)
		}
		claims[claimsKey{cluster: pvc.Labels[ferryv1alpha1.LabelClusterID], phase: phase}]++
		if phase == string(corev1.ClaimPending) && pvc.DeletionTimestamp.IsZero() {
			pending[client.ObjectKeyFromObject(pvc)] = pvc.CreationTimestamp.Time
		}
	}
	if len(pending) == 0 {
		return claims, pending, nil
	}
	waiting, err := c.waitedFor(ctx, pending)
	if err != nil {
		return nil, nil, err
	}
	return claims, waiting, nil
}

// waitedFor keeps the pending claims a pod not yet terminated uses, each
// with the later of its creation and its oldest such pod's.
func (c *ClaimsCollector) waitedFor(ctx context.Context, pending map[types.NamespacedName]time.Time) (map[types.NamespacedName]time.Time, error) {
	namespaces := map[string]bool{}
	for k := range pending {
		namespaces[k.Namespace] = true
	}
	oldestPod := map[types.NamespacedName]time.Time{}
	for ns := range namespaces {
		var pods corev1.PodList
		if err := c.Reader.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			pod := &pods.Items[i]
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || !pod.DeletionTimestamp.IsZero() {
				continue
			}
			for _, name := range claimNamesOf(pod) {
				k := types.NamespacedName{Namespace: ns, Name: name}
				if _, ok := pending[k]; !ok {
					continue
				}
				if t, ok := oldestPod[k]; !ok || pod.CreationTimestamp.Time.Before(t) {
					oldestPod[k] = pod.CreationTimestamp.Time
				}
			}
		}
	}
	waiting := map[types.NamespacedName]time.Time{}
	for k, podSince := range oldestPod {
		since := pending[k]
		if podSince.After(since) {
			since = podSince
		}
		waiting[k] = since
	}
	return waiting, nil
}

// claimNamesOf are the claims pod's volumes name, generic ephemeral ones
// included (named <pod>-<volume>).
func claimNamesOf(pod *corev1.Pod) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			names = append(names, ephemeral.VolumeClaimName(pod, &v))
		}
	}
	return names
}
