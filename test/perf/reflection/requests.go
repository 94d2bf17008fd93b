package reflection

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// verbWatch is how a requestCounter counts a GET that watches; other
// requests count under their HTTP method.
const verbWatch = "WATCH"

// mutatingMethods are the requests that write.
var mutatingMethods = map[string]bool{
	http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// requestCounter counts the requests one client configuration sends to one
// cluster (rest.Config.Wrap installs it), by verb, and the watches open at
// each moment: a watch is open from its response until its body is closed.
type requestCounter struct {
	mu     sync.Mutex
	byVerb requestCounts

	open, peak atomic.Int64
}

// requestCounts are requests by verb.
type requestCounts map[string]int64

func newRequestCounter() *requestCounter {
	return &requestCounter{byVerb: requestCounts{}}
}

// wrap is a transport.WrapperFunc.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb := req.Method
		watching := isWatch(req)
		if watching {
			verb = verbWatch
		}
		c.mu.Lock()
		c.byVerb[verb]++
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err != nil || !watching || resp.StatusCode < 200 || resp.StatusCode > 299 {
			return resp, err
		}
		n := c.open.Add(1)
		for {
			p := c.peak.Load()
			if n <= p || c.peak.CompareAndSwap(p, n) {
				break
			}
		}
		resp.Body = &watchBody{ReadCloser: resp.Body, done: func() { c.open.Add(-1) }}
		return resp, nil
	})
}

// isWatch tells a watch request: ?watch=true (or 1), or the old /watch/
// paths.
func isWatch(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

// watchBody calls done once, when the watch's body is first closed.
type watchBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *watchBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// counts is a copy of the requests counted so far.
func (c *requestCounter) counts() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byVerb)
}

// openWatches is the number of watches open now.
func (c *requestCounter) openWatches() int64 { return c.open.Load() }

// peakWatches is the most watches that were open at once.
func (c *requestCounter) peakWatches() int64 { return c.peak.Load() }

// minus is what was counted since before.
func (after requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for verb, n := range after {
		if d := n - before[verb]; d != 0 {
			out[verb] = d
		}
	}
	return out
}

// mutating is the POST, PUT, PATCH and DELETE requests.
func (c requestCounts) mutating() int64 {
	var n int64
	for verb, v := range c {
		if mutatingMethods[verb] {
			n += v
		}
	}
	return n
}

// String lists the verbs, most frequent first: "GET 12 WATCH 9".
func (c requestCounts) String() string {
	if len(c) == 0 {
		return "none"
	}
	verbs := slices.SortedFunc(maps.Keys(c), func(a, b string) int {
		return cmp.Or(cmp.Compare(c[b], c[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprintf("%s %d", v, c[v])
	}
	return strings.Join(parts, ", ")
}
