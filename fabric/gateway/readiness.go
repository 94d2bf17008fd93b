package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// lastReconcile records how the last reconcile of a single-key controller
// (the gateway's, the route agent's) ended, for /readyz: a component whose
// every reconcile fails (routes not made, links refused) must not report
// ready.
type lastReconcile struct {
	mu   sync.Mutex
	done bool
	err  error
}

// wrap returns r recording each result in l.
func (l *lastReconcile) wrap(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
		res, err := r.Reconcile(ctx, req)
		l.mu.Lock()
		l.done, l.err = true, err
		l.mu.Unlock()
		return res, err
	})
}

// check is the readiness check: ready once a reconcile has succeeded and
// as long as the last one did; otherwise it says why.
func (l *lastReconcile) check(*http.Request) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.done:
		return errors.New("no reconcile finished yet")
	case l.err != nil:
		return fmt.Errorf("the last reconcile failed: %w", l.err)
	}
	return nil
}

var _ healthz.Checker = (&lastReconcile{}).check

// withReadiness registers r with the manager's readiness checks (as
// "reconcile") and returns it wrapped to record its results.
func withReadiness(mgr ctrl.Manager, r reconcile.Reconciler) (reconcile.Reconciler, error) {
	l := &lastReconcile{}
	if err := mgr.AddReadyzCheck("reconcile", l.check); err != nil {
		return nil, fmt.Errorf("add readiness check: %w", err)
	}
	return l.wrap(r), nil
}
