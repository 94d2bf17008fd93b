package fencing

import (
	"testing"
	"time"
)

func TestProviderFenced(t *testing.T) {
	now := time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)
	T := 40 * time.Second
	cases := []struct {
		name    string
		o       Observation
		fenced  bool
		recheck time.Duration
	}{
		{"unarmed lease never fences", Observation{RenewTime: now.Add(-time.Hour), Duration: T}, false, 0},
		{"no duration never fences", Observation{Armed: true, RenewTime: now.Add(-time.Hour)}, false, 0},
		{"fresh renewal", Observation{Armed: true, Duration: T, RenewTime: now.Add(-10 * time.Second), Seen: true, SinceChange: 10 * time.Second}, false, 30 * time.Second},
		{"not seen changing for T fences though renewTime looks fresh (consumer clock ahead)", Observation{Armed: true, Duration: T, RenewTime: now.Add(time.Minute), Seen: true, SinceChange: T}, true, 0},
		{"renewTime older than T fences right after a restart", Observation{Armed: true, Duration: T, RenewTime: now.Add(-T - time.Millisecond)}, true, 0},
		{"after a restart a fresh renewTime waits for the rest of T", Observation{Armed: true, Duration: T, RenewTime: now.Add(-15 * time.Second)}, false, 25 * time.Second},
		{"whichever comes first: monotonic", Observation{Armed: true, Duration: T, RenewTime: now.Add(-5 * time.Second), Seen: true, SinceChange: 39 * time.Second}, false, time.Second},
		{"whichever comes first: wall clock", Observation{Armed: true, Duration: T, RenewTime: now.Add(-39 * time.Second), Seen: true, SinceChange: 5 * time.Second}, false, time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fenced, recheck := ProviderFenced(now, c.o)
			if fenced != c.fenced || recheck != c.recheck {
				t.Fatalf("ProviderFenced = %v, %v; want %v, %v", fenced, recheck, c.fenced, c.recheck)
			}
		})
	}
}

func TestConsumerFailsOver(t *testing.T) {
	T, m := 40*time.Second, 20*time.Second
	cases := []struct {
		name   string
		since  time.Duration
		fences bool
		fail   bool
		wait   time.Duration
	}{
		{"provider does not fence: never", time.Hour, false, false, 0},
		{"within T", 10 * time.Second, true, false, 50 * time.Second},
		{"past T, within the margin", 59 * time.Second, true, false, time.Second},
		{"at T + margin", 60 * time.Second, true, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fail, wait := ConsumerFailsOver(c.since, T, m, c.fences)
			if fail != c.fail || wait != c.wait {
				t.Fatalf("ConsumerFailsOver = %v, %v; want %v, %v", fail, wait, c.fail, c.wait)
			}
		})
	}
}

// The consumer never fails over before the provider has fenced, whatever
// the renewal history, as long as both clocks run at the same rate and the
// provider sees renewals no earlier than they happen.
func FuzzNeverFailOverBeforeFence(f *testing.F) {
	f.Add(int64(40), int64(20), int64(30), int64(5))
	f.Fuzz(func(t *testing.T, tSec, marginSec, outage, lag int64) {
		if tSec < 4 || tSec > 3600 || marginSec < 1 || marginSec > 3600 || outage < 0 || outage > 10000 || lag < 0 || lag >= marginSec {
			return
		}
		T, m := time.Duration(tSec)*time.Second, time.Duration(marginSec)*time.Second
		// The last renewal was seen by the provider lag after it happened;
		// outage is the time since the consumer's last renewal.
		since := time.Duration(outage) * time.Second
		failOver, _ := ConsumerFailsOver(since, T, m, true)
		seenAgo := since - time.Duration(lag)*time.Second
		if seenAgo < 0 {
			return
		}
		now := time.Unix(1e9, 0)
		fenced, _ := ProviderFenced(now, Observation{Armed: true, Duration: T, RenewTime: now.Add(-since), Seen: true, SinceChange: seenAgo})
		if failOver && !fenced {
			t.Fatalf("consumer fails over %v after its last renewal but the provider (seen %v ago) has not fenced", since, seenAgo)
		}
	})
}
