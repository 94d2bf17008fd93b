package offload

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ferry-io/ferry/controllers/peering"
)

// supervisePeriod is how often the controller managers' exits are looked
// for.
const supervisePeriod = time.Second

// supervise says, with the end of its log, each exit of a controller
// manager on its own (one that cannot renew its Lease in time, on an
// overloaded machine, exits; its ferryProcess starts it again, as a
// Deployment would) until the returned stop is called.
func (b *scaleBed) supervise(ctx context.Context, say func(string, ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(supervisePeriod)
		defer tick.Stop()
		seen := map[string]int{}
		for name, cm := range b.cms() {
			seen[name] = cm.Exits()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for name, cm := range b.cms() {
				if n := cm.Exits(); n > seen[name] {
					seen[name] = n
					say("ferry-controller-manager of %s exited (%d in all) and is started again; its log ended with:\n%s", name, n, logTail(cm.LogPath(), 4096))
				}
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// cms are the controller managers by cluster name.
func (b *scaleBed) cms() map[string]*ferryProcess {
	out := map[string]*ferryProcess{b.consumer.Name: b.consumerCM}
	for i, p := range b.providers {
		if i < len(b.providerCMs) {
			out[p.Name] = b.providerCMs[i]
		}
	}
	return out
}

// restartCount is how many times the controller managers exited on their
// own (and were started again), in all.
func (b *scaleBed) restartCount() int {
	n := 0
	for _, cm := range b.cms() {
		n += cm.Exits()
	}
	return n
}

// livePIDs are ferry's processes running now: each cluster's controller
// manager and each provider's virtual kubelet (those not running, e.g.
// being started again, are left out).
func (b *scaleBed) livePIDs() map[string]int {
	out := map[string]int{}
	for name, cm := range b.cms() {
		if pid := cm.PID(); pid != 0 {
			out[cmName(name)] = pid
		}
	}
	kubelets := b.consumerCM.VirtualKubeletPIDs()
	for _, id := range b.ids {
		if pid, ok := kubelets[peering.VirtualNodeName(id)]; ok {
			out[vkName(id)] = pid
		}
	}
	return out
}

// logTail is the last n bytes of the file at path, from a line's start.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if _, err := f.Seek(max(0, st.Size()-n), io.SeekStart); err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	raw, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	text := string(raw)
	if st.Size() > n {
		if _, rest, ok := strings.Cut(text, "\n"); ok {
			text = rest
		}
	}
	return strings.TrimRight(text, "\n")
}
