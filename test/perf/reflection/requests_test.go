package reflection

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequestCounterCountsVerbsAndOpenWatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	c := newRequestCounter()
	hc := &http.Client{Transport: c.wrap(http.DefaultTransport)}
	do := func(method, path string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodPost} {
		_ = do(m, "/api/v1/namespaces/a/configmaps").Body.Close()
	}
	w1 := do(http.MethodGet, "/api/v1/configmaps?labelSelector=x&watch=true")
	w2 := do(http.MethodGet, "/api/v1/namespaces/a/secrets?watch=1")
	w3 := do(http.MethodGet, "/api/v1/watch/namespaces/a/services")
	_ = do(http.MethodGet, "/missing?watch=true").Body.Close() // refused: never open
	if got := c.openWatches(); got != 3 {
		t.Errorf("open watches = %d, want 3", got)
	}
	_ = w1.Body.Close()
	_ = w1.Body.Close() // a second close is no second end
	_ = w2.Body.Close()
	if got := c.openWatches(); got != 1 {
		t.Errorf("open watches after closing two = %d, want 1", got)
	}
	_ = w3.Body.Close()
	if got, peak := c.openWatches(), c.peakWatches(); got != 0 || peak != 3 {
		t.Errorf("open watches = %d, peak %d; want 0 and 3", got, peak)
	}
	want := requestCounts{"GET": 1, "POST": 2, "PUT": 1, "PATCH": 1, "DELETE": 1, "WATCH": 4}
	if got := c.counts(); !maps.Equal(got, want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
	if got := c.counts().mutating(); got != 5 {
		t.Errorf("mutating = %d, want 5", got)
	}
}

func TestRequestCountsMinusAndString(t *testing.T) {
	before := requestCounts{"GET": 3, "POST": 1}
	after := requestCounts{"GET": 3, "POST": 11, "PUT": 2, "WATCH": 2}
	d := after.minus(before)
	if want := (requestCounts{"POST": 10, "PUT": 2, "WATCH": 2}); !maps.Equal(d, want) {
		t.Errorf("minus = %v, want %v", d, want)
	}
	if got, want := d.String(), "POST 10, PUT 2, WATCH 2"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (requestCounts{}).String(); got != "none" {
		t.Errorf("empty String = %q", got)
	}
}
