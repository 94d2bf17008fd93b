package v1alpha1

// Fencing is how a peering fails over without running a pod twice: the
// consumer renews a Lease in its tenant namespace on the provider; the
// provider stops the consumer's pods when the Lease has not been renewed
// for leaseDurationSeconds (self-fencing), and the consumer, once it has
// not renewed for leaseDurationSeconds + safetyMarginSeconds, may mark the
// provider's virtual nodes out of service so Kubernetes runs their pods
// elsewhere. The consumer-side fields act where the peer is a provider,
// selfFencing where it is a consumer.
type Fencing struct {
	// SelfFencing (where the peer is a consumer): stop the consumer's pods
	// here when its Lease has not been renewed for the lease duration the
	// consumer declares in it, and keep them stopped until it is renewed.
	// +kubebuilder:default=true
	// +optional
	SelfFencing *bool `json:"selfFencing,omitempty"`

	// LeaseDurationSeconds (where the peer is a provider) is T: how long
	// the provider waits without a renewal before it fences this cluster's
	// pods. This cluster renews every T/4.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=4
	// +kubebuilder:validation:Maximum=86400
	// +optional
	LeaseDurationSeconds int32 `json:"leaseDurationSeconds,omitempty"`

	// SafetyMarginSeconds (where the peer is a provider) is added to T
	// before this cluster fails the provider's pods over: it must exceed the
	// provider's delay in seeing the Lease, its fencer's period and the time
	// its pods take to stop.
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	SafetyMarginSeconds int32 `json:"safetyMarginSeconds,omitempty"`

	// OutOfService (where the peer is a provider): after T + margin
	// without a renewal, taint the provider's virtual nodes with
	// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, so that
	// their pods (StatefulSet pods too) are deleted and run elsewhere. Off
	// by default: it is safe only while the provider's controller manager
	// can reach its own API server to fence (see "Failover and fencing" in
	// docs/operations/failure-behaviour.md), and it is applied only when the provider's Lease says it
	// self-fences.
	// +optional
	OutOfService bool `json:"outOfService,omitempty"`
}

// Fencing names and defaults.
const (
	// ConsumerLeaseName is the Lease, in a consumer's tenant namespace on
	// the provider, that the consumer renews.
	ConsumerLeaseName = "ferry-consumer"
	// AnnotationSelfFencing, on the consumer's Lease, is the provider's
	// word that it fences ("true") or not ("false").
	AnnotationSelfFencing = "ferry.io/self-fencing"
	// ForeignClusterFenced, on a provider's ForeignCluster for a consumer:
	// the consumer's pods are stopped because its Lease expired.
	ForeignClusterFenced = "Fenced"
	// ForeignClusterOutOfService, on a consumer's ForeignCluster for a
	// provider: the provider's virtual nodes are marked out of service (a
	// condition of its own, so a peering both ways can show both).
	ForeignClusterOutOfService = "OutOfService"
	// TaintOutOfService is Kubernetes' non-graceful node shutdown taint.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// TaintOutOfServiceValue is the value ferry sets it with.
	TaintOutOfServiceValue = "nodeshutdown"
	// AnnotationOutOfServiceBy marks a taint ferry set, on the node.
	AnnotationOutOfServiceBy = "ferry.io/out-of-service"

	DefaultLeaseDurationSeconds = 300
	DefaultSafetyMarginSeconds  = 30
)

// SelfFences tells whether the provider fences a consumer (default true).
func (f *Fencing) SelfFences() bool { return f.SelfFencing == nil || *f.SelfFencing }

// LeaseDuration is T in seconds, defaulted.
func (f *Fencing) LeaseDuration() int32 {
	if f.LeaseDurationSeconds <= 0 {
		return DefaultLeaseDurationSeconds
	}
	return f.LeaseDurationSeconds
}

// SafetyMargin is the margin in seconds, defaulted.
func (f *Fencing) SafetyMargin() int32 {
	if f.SafetyMarginSeconds <= 0 {
		return DefaultSafetyMarginSeconds
	}
	return f.SafetyMarginSeconds
}
