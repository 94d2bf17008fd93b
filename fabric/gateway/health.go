package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Health is the readiness of a reconcile loop (the gateway's or the route
// agent's): not ready until a reconcile has finished, and not while the
// last one failed. Its Check is a controller-runtime healthz.Checker; the
// gateway and the route agent serve it as the "reconcile" check of /readyz
// (also at /readyz/reconcile) on --health-probe-bind-address.
type Health struct {
	mu     sync.Mutex
	done   bool
	err    error
	since  time.Time // first failure of the current run of failures
	failed int       // reconciles failed in a row
}

// errNotReconciled: no reconcile has finished yet.
var errNotReconciled = errors.New("no reconcile has finished yet")

// Record notes the result of a reconcile.
func (h *Health) Record(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if err == nil {
		h.err, h.failed, h.since = nil, 0, time.Time{}
		return
	}
	if h.failed == 0 {
		h.since = now
	}
	h.err = err
	h.failed++
}

// Check fails while no reconcile has finished or the last one failed,
// saying why.
func (h *Health) Check(*http.Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.done:
		return errNotReconciled
	case h.err != nil:
		return fmt.Errorf("the last %d reconciles failed (since %s): %w", h.failed, h.since.UTC().Format(time.RFC3339), h.err)
	}
	return nil
}
