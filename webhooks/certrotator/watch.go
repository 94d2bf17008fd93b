package certrotator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// minWatchBackoff and maxWatchBackoff bound the delay before a failed
	// or closed watch is re-established. The periodic check covers events
	// missed meanwhile.
	minWatchBackoff = 500 * time.Millisecond
	maxWatchBackoff = 30 * time.Second
)

// watchSecret pokes the rotation loop whenever the Secret changes, so that a
// replica serves a certificate another replica rotated right away, and a
// deleted Secret is recreated.
func (r *Rotator) watchSecret(ctx context.Context, poke func()) {
	open := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return r.Client.CoreV1().Secrets(r.SecretNamespace).Watch(ctx, opts)
	}
	watchNamed(ctx, "Secret", r.SecretName, open, poke)
}

// watchConfig pokes the rotation loop whenever the named webhook
// configuration changes, so that a configuration created late, or re-applied
// without caBundle (kubectl replace, helm upgrade), is injected right away.
func (r *Rotator) watchConfig(ctx context.Context, ref configRef, poke func()) {
	api := r.Client.AdmissionregistrationV1()
	open := func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		if ref.kind == kindMutating {
			return api.MutatingWebhookConfigurations().Watch(ctx, opts)
		}
		return api.ValidatingWebhookConfigurations().Watch(ctx, opts)
	}
	watchNamed(ctx, ref.kind, ref.name, open, poke)
}

// watchNamed watches the single object called name and calls poke for every
// event about it, until ctx is done. The watch is restricted by a
// metadata.name field selector, which keeps traffic small and lets RBAC
// grant list/watch for just this name; events about other objects are
// ignored anyway in case the server (or a fake) does not filter.
//
// A raw watch rather than an informer suffices: the rotation loop re-reads
// the objects itself and only needs to know when to look. Whenever the watch
// is (re-)established the loop is poked once, since events may have been
// missed while it was down.
func watchNamed(ctx context.Context, kind, name string,
	open func(context.Context, metav1.ListOptions) (watch.Interface, error), poke func()) {
	logger := log.FromContext(ctx).WithValues("watchKind", kind, "watchName", name)
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	backoff := minWatchBackoff
	for ctx.Err() == nil {
		w, err := open(ctx, opts)
		if err != nil {
			logger.Error(err, "Watch failed; retrying", "retryIn", backoff)
		} else {
			started := time.Now()
			poke()
			consume(ctx, w, name, poke)
			w.Stop()
			if time.Since(started) > maxWatchBackoff {
				backoff = minWatchBackoff
			}
			logger.V(1).Info("Watch closed; re-establishing", "retryIn", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxWatchBackoff)
	}
}

// consume forwards events about name until the watch ends, reports an
// error, or ctx is done.
func consume(ctx context.Context, w watch.Interface, name string, poke func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			switch ev.Type {
			case watch.Error:
				return
			case watch.Bookmark:
				continue
			}
			if obj, err := meta.Accessor(ev.Object); err == nil && obj.GetName() == name {
				poke()
			}
		}
	}
}
