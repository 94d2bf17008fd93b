package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ferryv1alpha1 "github.com/ferry-io/ferry/api/v1alpha1"
)

// Defaults of the gateway's leader election: a replica killed at once is
// replaced within about LeaseDuration plus two RetryPeriods.
const (
	DefaultLeaseName     = "ferry-gateway"
	DefaultLeaseDuration = 1 * time.Second
	DefaultRenewDeadline = 750 * time.Millisecond
	DefaultRetryPeriod   = 250 * time.Millisecond
	// minTeardownBudget is the least time left between the renew deadline
	// (when the active tears down) and the lease's expiry (when another
	// replica may take it): removing the tunnel, NAT and links takes a
	// few milliseconds to tens of milliseconds.
	minTeardownBudget = 100 * time.Millisecond
	// LabelActive marks the active gateway pod ("true"); the gateway
	// Service selects it, so a Service-fronted endpoint reaches only the
	// active replica.
	LabelActive = "ferry.io/gateway-active"
)

// ElectionOptions configure the gateway's active/passive election.
type ElectionOptions struct {
	// Enabled runs the election; when false the gateway is always active
	// (a single replica).
	Enabled bool
	// LeaseName is the coordination Lease in ferry-system.
	LeaseName string
	// Identity of this replica (its pod name, unique among the replicas).
	Identity string
	// PodName is this replica's pod in ferry-system, labelled LabelActive
	// while it is active ("": no pod to label).
	PodName string
	// LeaseDuration: another replica takes the lease this long after it
	// last saw it renewed. RenewDeadline: the active tears down this long
	// after it sent its last successful renewal. RetryPeriod: how often the
	// active renews and a passive tries.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Validate says which flag is wrong.
func (o ElectionOptions) Validate() error {
	if !o.Enabled {
		return nil
	}
	switch {
	case o.LeaseName == "":
		return fmt.Errorf("--leader-elect-lease-name is empty")
	case o.Identity == "":
		return fmt.Errorf("--leader-elect-identity is empty (default: $POD_NAME)")
	case o.RetryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %s: want > 0", o.RetryPeriod)
	case o.RenewDeadline <= o.RetryPeriod:
		return fmt.Errorf("--leader-elect-renew-deadline %s: want more than --leader-elect-retry-period %s (at least one retry)", o.RenewDeadline, o.RetryPeriod)
	case o.LeaseDuration-o.RenewDeadline < minTeardownBudget:
		return fmt.Errorf("--leader-elect-lease-duration %s: want at least %s more than --leader-elect-renew-deadline %s (time to tear down before another replica may take over)",
			o.LeaseDuration, minTeardownBudget, o.RenewDeadline)
	}
	return nil
}

// Leadership is whether this replica is the active one. Apply on the data
// plane and the replica's writes happen under its lock, only while
// active; stepping down tears the data plane down under the same lock, so
// nothing is installed after a step-down.
type Leadership struct {
	mu     sync.Mutex
	active bool
	// teardown removes the data plane (on step-down).
	teardown func() error
	// wake asks the reconciler to run at once (on becoming active).
	wmu  sync.Mutex
	wake func()
	// changed is called after each change, outside the lock.
	changed func(active bool)
	// identity names this replica (NetworkConfig status).
	identity string
}

// Identity is this replica's name in the election ("" without one).
func (l *Leadership) Identity() string {
	if l == nil {
		return ""
	}
	return l.identity
}

// errPassive: the replica is not (or no longer) the active one.
var errPassive = errors.New("this gateway replica is passive")

// Active says whether this replica holds the lease now.
func (l *Leadership) Active() bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active
}

// Do runs f only while active, holding off any step-down until f returns.
func (l *Leadership) Do(f func() error) error {
	if l == nil {
		return f()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return errPassive
	}
	return f()
}

func (l *Leadership) set(active bool) error {
	l.mu.Lock()
	was := l.active
	l.active = active
	var err error
	if !active && l.teardown != nil {
		// Also when it was not active: a replica restarted in the same
		// pod finds what its predecessor left.
		err = l.teardown()
	}
	l.mu.Unlock()
	activeGauge.Set(map[bool]float64{true: 1, false: 0}[active])
	if was != active && l.changed != nil {
		l.changed(active)
	}
	if active {
		l.wmu.Lock()
		if l.wake != nil {
			l.wake()
		}
		l.wmu.Unlock()
	}
	return err
}

// source wakes the reconciler whenever the replica becomes active.
func (l *Leadership) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		l.wake = func() { q.Add(request) }
		return nil
	})
}

// Elector campaigns for the gateway Lease and keeps Leadership true only
// while this replica surely holds it. It is client-go's leader election
// rule (the lease is free once a candidate has seen it unchanged for
// LeaseDuration, on its own clock), with the holder's deadline counted
// from when it *sent* its last successful renewal rather than from the
// reply: a reply delayed by a flapping network then never makes the
// holder believe in a lease others may already take.
type Elector struct {
	Client kubernetes.Interface
	ElectionOptions
	Leadership *Leadership
	Log        logr.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// What a candidate saw of the lease: its record and when it changed.
	observed   *coordinationv1.Lease
	observedAt time.Time
	validUntil time.Time // the holder's step-down time
	held       bool
}

func (e *Elector) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// NeedLeaderElection: the elector runs on every replica.
func (e *Elector) NeedLeaderElection() bool { return false }

// Start campaigns until ctx ends; it then steps down (tearing down the
// data plane first) and releases the lease, so that the other replica
// takes over at once on a graceful stop.
func (e *Elector) Start(ctx context.Context) error {
	// Nothing may forward before this replica holds the lease.
	if err := e.Leadership.set(false); err != nil {
		e.Log.Error(err, "Removing what a previous gateway left in this pod")
	}
	for ctx.Err() == nil {
		wait := e.RetryPeriod
		if e.held {
			if e.renew(ctx) {
				e.Log.V(4).Info("Renewed the gateway lease", "lease", e.LeaseName)
			} else if !e.held {
				// renew found the lease taken and stepped down.
			} else if !e.now().Before(e.validUntil) {
				e.stepDown("could not renew the lease before its renew deadline")
			} else {
				wait = min(wait, e.validUntil.Sub(e.now()))
			}
		} else if e.tryAcquire(ctx) {
			e.Log.Info("Became the active gateway replica", "lease", e.LeaseName, "identity", e.Identity)
			if err := e.Leadership.set(true); err != nil {
				e.Log.Error(err, "Becoming active")
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if e.held {
		e.stepDown("stopping")
		e.release()
	}
	return nil
}

func (e *Elector) stepDown(why string) {
	e.held = false
	e.Log.Info("No longer the active gateway replica: removing the tunnel, NAT and routes", "reason", why, "lease", e.LeaseName)
	if err := e.Leadership.set(false); err != nil {
		e.Log.Error(err, "Tearing down on step-down")
	}
}

func (e *Elector) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(context.Context, *coordinationv1.Lease, metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(context.Context, *coordinationv1.Lease, metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return e.Client.CoordinationV1().Leases(ferryv1alpha1.SystemNamespace)
}

// renew extends the held lease; false when it failed (the caller steps
// down once past validUntil).
func (e *Elector) renew(ctx context.Context) bool {
	sent := e.now()
	rctx, cancel := context.WithDeadline(ctx, e.validUntil)
	defer cancel()
	l := e.observed.DeepCopy()
	now := metav1.NewMicroTime(sent)
	l.Spec.RenewTime = &now
	got, err := e.leases().Update(rctx, l, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			// Someone else wrote it: were it taken, this replica's deadline
			// still holds, and the next tryAcquire rules.
			e.Log.Info("The gateway lease changed under its holder", "lease", e.LeaseName)
			if cur, gerr := e.leases().Get(rctx, e.LeaseName, metav1.GetOptions{}); gerr == nil {
				if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != e.Identity {
					e.stepDown("the lease is held by " + holder(cur))
					e.see(cur)
					return false
				}
				e.observed = cur
			}
			return false
		}
		e.Log.V(2).Info("Renewing the gateway lease failed", "err", err.Error())
		return false
	}
	e.observed, e.observedAt = got, e.now()
	e.validUntil = sent.Add(e.RenewDeadline)
	return true
}

// tryAcquire takes the lease when free, expired (unchanged for
// LeaseDuration) or already ours.
func (e *Elector) tryAcquire(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, e.RetryPeriod*4)
	defer cancel()
	sent := e.now()
	cur, err := e.leases().Get(rctx, e.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ferryv1alpha1.SystemNamespace, Name: e.LeaseName}}
		e.fill(l, sent, true)
		got, err := e.leases().Create(rctx, l, metav1.CreateOptions{})
		if err != nil {
			e.Log.V(2).Info("Creating the gateway lease failed", "err", err.Error())
			return false
		}
		e.won(got, sent)
		return true
	case err != nil:
		e.Log.V(2).Info("Reading the gateway lease failed", "err", err.Error())
		return false
	}
	e.see(cur)
	h := holder(cur)
	if h != "" && h != e.Identity && e.now().Before(e.observedAt.Add(e.LeaseDuration)) {
		return false
	}
	l := cur.DeepCopy()
	e.fill(l, sent, h != e.Identity)
	got, err := e.leases().Update(rctx, l, metav1.UpdateOptions{})
	if err != nil {
		e.Log.V(2).Info("Taking the gateway lease failed", "err", err.Error(), "holder", h)
		return false
	}
	if h != "" && h != e.Identity {
		e.Log.Info("Took the gateway lease over", "from", h, "unchanged for", e.now().Sub(e.observedAt).Round(time.Millisecond))
	}
	e.won(got, sent)
	return true
}

// see records a candidate's reading of the lease: the expiry clock runs
// from the last change seen.
func (e *Elector) see(cur *coordinationv1.Lease) {
	if e.observed == nil || e.observed.ResourceVersion != cur.ResourceVersion || holder(e.observed) != holder(cur) ||
		!e.observed.Spec.RenewTime.Equal(cur.Spec.RenewTime) {
		e.observed, e.observedAt = cur, e.now()
	}
}

func (e *Elector) won(l *coordinationv1.Lease, sent time.Time) {
	e.held, e.observed, e.observedAt = true, l, e.now()
	e.validUntil = sent.Add(e.RenewDeadline)
}

func (e *Elector) fill(l *coordinationv1.Lease, now time.Time, acquire bool) {
	t := metav1.NewMicroTime(now)
	id := e.Identity
	secs := int32(math.Ceil(e.LeaseDuration.Seconds()))
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &id, &secs, &t
	if acquire {
		l.Spec.AcquireTime = &t
		n := int32(0)
		if l.Spec.LeaseTransitions != nil {
			n = *l.Spec.LeaseTransitions + 1
		}
		l.Spec.LeaseTransitions = &n
	}
}

// release frees the lease (after the data plane is down), so that the
// other replica takes it at its next try.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l := e.observed.DeepCopy()
	empty := ""
	one := int32(1)
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &empty, &one
	if _, err := e.leases().Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		e.Log.Error(err, "Releasing the gateway lease (the other replica takes it once it expires)")
		return
	}
	e.Log.Info("Released the gateway lease", "lease", e.LeaseName)
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// labelPod sets or removes LabelActive on a gateway pod in ferry-system.
func labelPod(ctx context.Context, c kubernetes.Interface, pod string, active bool) error {
	patch := []byte(`{"metadata":{"labels":{"` + LabelActive + `":null}}}`)
	if active {
		patch = []byte(`{"metadata":{"labels":{"` + LabelActive + `":"true"}}}`)
	}
	if _, err := c.CoreV1().Pods(ferryv1alpha1.SystemNamespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label pod %s/%s %s=%t: %w", ferryv1alpha1.SystemNamespace, pod, LabelActive, active, err)
	}
	return nil
}

// unlabelOthers removes LabelActive from every other pod carrying it: the
// lease holder is the only active replica, whatever a killed or cut-off
// one left on its pod.
func unlabelOthers(ctx context.Context, c kubernetes.Interface, self string) error {
	pods, err := c.CoreV1().Pods(ferryv1alpha1.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: LabelActive + "=true"})
	if err != nil {
		return fmt.Errorf("list pods labelled %s: %w", LabelActive, err)
	}
	var errs []error
	for _, p := range pods.Items {
		if p.Name != self {
			errs = append(errs, labelPod(ctx, c, p.Name, false))
		}
	}
	return errors.Join(errs...)
}

// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=ferry-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=ferry-system,resources=pods,verbs=get;list;patch

// addElection adds the Elector to mgr, over its own client (the lease is
// read and written directly, never from a cache) whose requests time out
// within a retry period's reach, and labels this replica's pod while it is
// active.
func addElection(mgr manager.Manager, cfg *rest.Config, o ElectionOptions, dp *DataPlane) (*Leadership, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = o.LeaseDuration
	// A renewal every retry period: client-go's default rate limit (5/s)
	// would queue them behind the labels' patches.
	cfg.QPS, cfg.Burst = 50, 100
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	log := mgr.GetLogger().WithName("election")
	lead := &Leadership{teardown: dp.Teardown, identity: o.Identity}
	var lmu sync.Mutex
	lead.changed = func(active bool) {
		if o.PodName == "" {
			return
		}
		go func() {
			lmu.Lock()
			defer lmu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// The state now, not the one that started this: flips may
			// overtake each other.
			a := lead.Active()
			err := labelPod(ctx, c, o.PodName, a)
			if a {
				err = errors.Join(err, unlabelOthers(ctx, c, o.PodName))
			}
			if err != nil {
				log.Error(err, "Labelling the gateway pods", "active", a)
			}
		}()
	}
	if o.PodName != "" {
		// A restarted replica's pod may still say active.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := labelPod(ctx, c, o.PodName, false); err != nil {
			log.Error(err, "Clearing the active label of this replica's pod")
		}
	}
	e := &Elector{Client: c, ElectionOptions: o, Leadership: lead, Log: log}
	if err := mgr.Add(e); err != nil {
		return nil, err
	}
	return lead, nil
}
