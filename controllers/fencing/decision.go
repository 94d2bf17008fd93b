// Package fencing keeps a consumer's pods from running twice when it loses
// a provider: the consumer renews a Lease on the provider (Renewer), the
// provider stops the consumer's pods when the Lease expires (Fencer, and
// the ShadowPod controller asking Fences), and the consumer marks the
// provider's virtual nodes out of service only after the lease duration
// plus a safety margin without a renewal.
package fencing

import "time"

// Observation is what a provider knows of a consumer's Lease.
type Observation struct {
	// Armed: the consumer has renewed the Lease at least once (it has a
	// renewTime and a duration); an unarmed Lease never fences.
	Armed bool
	// Duration is T, as the consumer declares it in the Lease.
	Duration time.Duration
	// RenewTime is the Lease's spec.renewTime, the consumer's wall clock.
	RenewTime time.Time
	// SinceChange is how long ago, on the provider's monotonic clock, this
	// process saw the Lease change; Seen says whether it has seen it at
	// all since it started.
	SinceChange time.Duration
	Seen        bool
}

// ProviderFenced decides, on the provider at wall time now, whether the
// consumer's pods must be stopped: when this process has not seen the Lease
// change for T, or when the renewTime written in it is older than T by this
// clock (right after a restart, when the process has not watched it for T
// yet), whichever comes first. It returns how long until the answer would
// change by itself (0 when it would not).
func ProviderFenced(now time.Time, o Observation) (fenced bool, recheck time.Duration) {
	if !o.Armed || o.Duration <= 0 {
		return false, 0
	}
	left := o.Duration - now.Sub(o.RenewTime)
	if o.Seen {
		left = min(left, o.Duration-o.SinceChange)
	}
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// ConsumerFailsOver decides, on the consumer, whether the provider's
// virtual nodes may be marked out of service: only when the provider said
// it self-fences, and this cluster has not renewed its Lease for T plus the
// margin (sinceRenewal on its monotonic clock, counted from its start when
// it has not renewed since). It returns how long until it would.
func ConsumerFailsOver(sinceRenewal, duration, margin time.Duration, providerFences bool) (failOver bool, wait time.Duration) {
	if !providerFences || duration <= 0 {
		return false, 0
	}
	left := duration + margin - sinceRenewal
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// RenewPeriod is how often the consumer renews a Lease of duration T: T/4,
// so three renewals in a row may fail before the provider fences.
func RenewPeriod(duration time.Duration) time.Duration {
	return max(duration/4, 250*time.Millisecond)
}
