// Package reflection keeps, for every namespace offloaded to one provider,
// the objects its offloaded pods need equal on the provider: ConfigMaps,
// Secrets, Services, EndpointSlices, Ingresses, ServiceAccounts (with a
// usable token of the consumer's service account) and
// PersistentVolumeClaims, and brings the provider's Events about them back.
//
// The local copy is the truth: the provider's copy is created, repaired when
// it drifts and deleted with the local one (or when the local one opts out).
// Each kind has one shared informer per cluster, not one per namespace (the
// provider's are selected by ferry's origin labels), a rate-limited work
// queue and its own workers; an object already equal to what it should be is
// never written.
package reflection
