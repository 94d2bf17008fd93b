package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// replica is one elector over its own fake client, which shares the
// others' object store and can be cut off from it.
type replica struct {
	name    string
	cut     atomic.Bool
	elector *Elector
	lead    *Leadership
	stop    context.CancelFunc
	done    chan struct{}
}

// twoActive watches the replicas' Leadership: at no point may two have
// their data plane up.
type twoActive struct {
	mu     sync.Mutex
	up     map[string]bool
	failed []string
	took   map[string]int
}

func (w *twoActive) set(name string, active bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.up[name] = active
	if active {
		w.took[name]++
	}
	n := 0
	for _, a := range w.up {
		if a {
			n++
		}
	}
	if n > 1 {
		w.failed = append(w.failed, name+" became active while another was")
	}
}

func startReplica(t *testing.T, cs *fake.Clientset, name string, w *twoActive, o ElectionOptions) *replica {
	r := &replica{name: name, done: make(chan struct{})}
	c := &fake.Clientset{}
	c.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if r.cut.Load() {
			// A partition: the request hangs a while (a real client's
			// would until its context's deadline).
			time.Sleep(o.RetryPeriod)
			return true, nil, errors.New("cut off from the API server")
		}
		return k8stesting.ObjectReaction(cs.Tracker())(a)
	})
	o.Identity = name
	// Step-down marks the data plane down first (under the lock), as the
	// real teardown does.
	r.lead = &Leadership{}
	r.lead.teardown = func() error { w.set(name, false); return nil }
	r.lead.changed = func(active bool) {
		if active {
			w.set(name, true)
		}
	}
	r.elector = &Elector{Client: c, ElectionOptions: o, Leadership: r.lead, Log: testr.New(t).WithName(name)}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = func() { cancel(); <-r.done }
	go func() { defer close(r.done); _ = r.elector.Start(ctx) }()
	return r
}

func waitFor(t *testing.T, what string, d time.Duration, f func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !f() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func TestElectionNeverTwoActive(t *testing.T) {
	o := ElectionOptions{Enabled: true, LeaseName: "gw", LeaseDuration: 400 * time.Millisecond, RenewDeadline: 250 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}
	if err := (ElectionOptions{Enabled: true, LeaseName: "gw", Identity: "a", LeaseDuration: o.LeaseDuration, RenewDeadline: o.LeaseDuration, RetryPeriod: o.RetryPeriod}).Validate(); err == nil {
		t.Fatal("a renew deadline as long as the lease validated")
	}
	cs := fake.NewClientset()
	w := &twoActive{up: map[string]bool{}, took: map[string]int{}}
	a := startReplica(t, cs, "a", w, o)
	waitFor(t, "a active", 5*time.Second, a.lead.Active)
	b := startReplica(t, cs, "b", w, o)
	defer b.stop()
	time.Sleep(3 * o.LeaseDuration)
	if b.lead.Active() || !a.lead.Active() {
		t.Fatalf("the passive took a renewed lease: a %t, b %t", a.lead.Active(), b.lead.Active())
	}

	// Partitions of the active, again and again: each time the active
	// steps down before the other takes over, and the roles swap.
	for i := range 4 {
		act, pas := a, b
		if i%2 == 1 {
			act, pas = b, a
		}
		act.cut.Store(true)
		took := waitFor(t, pas.name+" takes over", 5*time.Second, pas.lead.Active)
		t.Logf("partition %d: %s took over after %s", i, pas.name, took)
		if act.lead.Active() {
			t.Fatalf("%s still active once %s took over", act.name, pas.name)
		}
		act.cut.Store(false)
		time.Sleep(2 * o.LeaseDuration)
		if act.lead.Active() || !pas.lead.Active() {
			t.Fatalf("after healing, %s active %t, %s active %t", act.name, act.lead.Active(), pas.name, pas.lead.Active())
		}
	}
	// A flapping active: cut and healed faster than the lease runs out.
	for range 10 {
		a.cut.Store(true)
		time.Sleep(o.RenewDeadline / 2)
		a.cut.Store(false)
		time.Sleep(o.RetryPeriod)
	}
	time.Sleep(2 * o.LeaseDuration)

	// A graceful stop releases: the other takes over well before the
	// lease could expire.
	a.stop()
	took := waitFor(t, "b takes over on a's graceful stop", 5*time.Second, b.lead.Active)
	t.Logf("release: b took over after %s", took)
	if took >= o.LeaseDuration {
		t.Errorf("b took over after %s, not at its next try after the release", took)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failed) > 0 {
		t.Fatalf("two active replicas: %v", w.failed)
	}
}

func TestActiveGauge(t *testing.T) {
	down := 0
	l := &Leadership{teardown: func() error { down++; return nil }}
	for _, active := range []bool{true, false, true} {
		if err := l.set(active); err != nil {
			t.Fatal(err)
		}
		want := map[bool]float64{true: 1, false: 0}[active]
		if got := testutil.ToFloat64(activeGauge); got != want || l.Active() != active {
			t.Fatalf("after set(%t): ferry_gateway_active %v, Active() %t", active, got, l.Active())
		}
	}
	if down != 1 {
		t.Fatalf("teardowns %d, want 1 (on the step-down)", down)
	}
	if err := l.Do(func() error { return nil }); err != nil {
		t.Fatalf("Do while active: %v", err)
	}
	_ = l.set(false)
	if err := l.Do(func() error { t.Fatal("ran while passive"); return nil }); err != errPassive {
		t.Fatalf("Do while passive: %v, want errPassive", err)
	}
}
