package mover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Relay accepts connections on a listener and joins each to a new
// connection to To, both ways, until either end closes: a provider's fetch
// reaches another provider's serve through a relay in the consumer, whose
// pod network both are joined to.
type Relay struct {
	To  string
	Log *slog.Logger
}

// Serve relays every connection ln accepts until ctx ends, then closes
// them all and returns nil.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	r.Log.Info("relaying", "address", ln.Addr().String(), "to", r.To)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				r.Log.Info("stopped")
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("relay on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() { r.relay(ctx, c) })
	}
}

func (r *Relay) relay(ctx context.Context, in net.Conn) {
	log := r.Log.With("from", in.RemoteAddr().String(), "to", r.To)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAliveConfig: keepAlive}
	out, err := dialer.DialContext(ctx, "tcp", r.To)
	if err != nil {
		log.Error("cannot reach --to", "err", err)
		_ = in.Close()
		return
	}
	log.Info("relaying a connection")
	stop := context.AfterFunc(ctx, func() { _ = in.Close(); _ = out.Close() })
	defer stop()
	var wg sync.WaitGroup
	var up, down int64
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = in.Close(); _ = out.Close() }) }
	pipe := func(dst, src net.Conn, n *int64) {
		var err error
		*n, err = io.Copy(dst, src)
		if err != nil {
			// Either end failed: the other must see it, not a clean end.
			closeBoth()
			return
		}
		// src ended cleanly: pass its end on, keep the other way open.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			closeBoth()
		}
	}
	wg.Go(func() { pipe(out, in, &up) })
	wg.Go(func() { pipe(in, out, &down) })
	wg.Wait()
	closeBoth()
	log.Info("connection ended", "bytesUp", up, "bytesDown", down)
}
