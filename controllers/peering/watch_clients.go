package peering

import (
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	ferryscheme "github.com/ferry-io/ferry/api/scheme"
)

// WatchClients hands out, for each Provider (one per credential version),
// a client that can also watch, built once: a watcher that gets the same
// client back knows the credential did not change.
type WatchClients struct {
	mu sync.Mutex
	by map[*Provider]client.WithWatch
}

// NewWatchClients returns an empty WatchClients.
func NewWatchClients() *WatchClients {
	return &WatchClients{by: map[*Provider]client.WithWatch{}}
}

// For is p's client that watches, with p's credential and rate limit.
func (w *WatchClients) For(p *Provider) (client.WithWatch, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.by[p]; ok {
		return c, nil
	}
	c, err := client.NewWithWatch(p.Config, client.Options{Scheme: ferryscheme.Scheme()})
	if err != nil {
		return nil, fmt.Errorf("client that watches the provider: %w", err)
	}
	// Clients of credentials replaced since are dropped: one per provider
	// stays, its latest.
	for old := range w.by {
		if old.TenantNamespace == p.TenantNamespace && old.Config.Host == p.Config.Host {
			delete(w.by, old)
		}
	}
	w.by[p] = c
	return c, nil
}
