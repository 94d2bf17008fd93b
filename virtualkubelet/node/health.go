package node

import (
	"fmt"
	"time"
)

// Reasons of the Node's Ready condition and of the VirtualNode's NodeReady
// condition.
const (
	ReasonProviderReachable   = "ProviderReachable"
	ReasonProviderUnreachable = "ProviderUnreachable"
)

const messageProviderReachable = "the provider's API server is ready"

// maxMessageLength bounds the Ready condition's message (the error of a
// failed probe may carry a whole answer body).
const maxMessageLength = 1024

// Health is the provider's health as the Node reports it: a small state
// machine fed with probe results. It starts Ready (the provider is assumed
// reachable until proven otherwise), turns NotReady after Threshold
// consecutive failed probes and Ready again on the first success after that.
// It changes only on those transitions, so steady probing writes nothing.
type Health struct {
	// Threshold is how many consecutive failures make it NotReady (>= 1).
	Threshold int
	// Failures counts the consecutive failed probes up to now.
	Failures int
	// Ready is the reported state.
	Ready bool
	// Reason and Message explain Ready: ReasonProviderReachable, or
	// ReasonProviderUnreachable with the error that caused the transition.
	Reason, Message string
	// Since is when Ready last changed (or the start).
	Since time.Time
}

// NewHealth is the state at start: Ready.
func NewHealth(threshold int, now time.Time) Health {
	return Health{Threshold: max(threshold, 1), Ready: true, Reason: ReasonProviderReachable, Message: messageProviderReachable, Since: now}
}

// Observe records one probe result (nil: success) and reports whether the
// reported state (Ready, Reason, Message) changed.
func (h *Health) Observe(probeErr error, now time.Time) (changed bool) {
	if probeErr == nil {
		h.Failures = 0
		if h.Ready {
			return false
		}
		h.Ready, h.Reason, h.Message, h.Since = true, ReasonProviderReachable, messageProviderReachable, now
		return true
	}
	h.Failures++
	if !h.Ready || h.Failures < h.Threshold {
		return false
	}
	h.Ready, h.Reason, h.Since = false, ReasonProviderUnreachable, now
	h.Message = fmt.Sprintf("%d consecutive health checks of the provider's API server failed, last: %v", h.Failures, probeErr)
	if len(h.Message) > maxMessageLength {
		h.Message = h.Message[:maxMessageLength-3] + "..."
	}
	return true
}
