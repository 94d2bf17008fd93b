package node

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	boom := errors.New("connection refused")
	type step struct {
		err         error
		wantChanged bool
		wantReady   bool
	}
	ok := func(changed, ready bool) step { return step{nil, changed, ready} }
	fail := func(changed, ready bool) step { return step{boom, changed, ready} }
	tests := []struct {
		name      string
		threshold int
		steps     []step
	}{
		{name: "steady success never changes", threshold: 3, steps: []step{ok(false, true), ok(false, true), ok(false, true)}},
		{name: "fewer failures than the threshold", threshold: 3, steps: []step{fail(false, true), fail(false, true), ok(false, true), fail(false, true), fail(false, true)}},
		{name: "threshold reached", threshold: 3, steps: []step{fail(false, true), fail(false, true), fail(true, false), fail(false, false), fail(false, false)}},
		{name: "recovery on first success", threshold: 2, steps: []step{fail(false, true), fail(true, false), ok(true, true), ok(false, true)}},
		{name: "failures counted afresh after recovery", threshold: 2, steps: []step{fail(false, true), fail(true, false), ok(true, true), fail(false, true), fail(true, false)}},
		{name: "threshold one", threshold: 1, steps: []step{fail(true, false), ok(true, true), fail(true, false)}},
		{name: "threshold below one acts as one", threshold: 0, steps: []step{fail(true, false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			h := NewHealth(tt.threshold, start)
			if !h.Ready || h.Reason != ReasonProviderReachable {
				t.Fatalf("initial health = %+v, want Ready", h)
			}
			for i, s := range tt.steps {
				now := start.Add(time.Duration(i+1) * time.Second)
				before := h
				changed := h.Observe(s.err, now)
				if changed != s.wantChanged || h.Ready != s.wantReady {
					t.Fatalf("step %d (err %v): changed=%v ready=%v, want changed=%v ready=%v", i, s.err, changed, h.Ready, s.wantChanged, s.wantReady)
				}
				if changed && !h.Since.Equal(now) {
					t.Errorf("step %d: Since = %v, want %v", i, h.Since, now)
				}
				if !changed && (h.Since != before.Since || h.Reason != before.Reason || h.Message != before.Message) {
					t.Errorf("step %d: reported state changed without saying so: %+v -> %+v", i, before, h)
				}
				wantReason := ReasonProviderReachable
				if !h.Ready {
					wantReason = ReasonProviderUnreachable
					if !strings.Contains(h.Message, boom.Error()) {
						t.Errorf("step %d: message %q does not carry the last error", i, h.Message)
					}
				}
				if h.Reason != wantReason {
					t.Errorf("step %d: reason %q, want %q", i, h.Reason, wantReason)
				}
			}
		})
	}
}

func TestHealthMessageIsBounded(t *testing.T) {
	h := NewHealth(1, time.Unix(0, 0))
	h.Observe(errors.New(strings.Repeat("x", 5000)), time.Unix(1, 0))
	if len(h.Message) > maxMessageLength || !strings.HasSuffix(h.Message, "...") {
		t.Errorf("message of %d bytes, want at most %d, cut with ...", len(h.Message), maxMessageLength)
	}
}
