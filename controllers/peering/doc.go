// Package peering implements ferry's peering controllers.
//
// On a provider: TenantReconciler gives each consumer (a ForeignCluster with
// role Consumer) a tenant namespace and a service account whose RBAC reaches
// that namespace only; GrantReconciler answers the consumer's ResourceSlice
// with a grant computed by package grant.
//
// On a consumer: PeerReconciler follows each provider (a ForeignCluster with
// role Provider) with the credential it was given: it probes the provider's
// API server, asks for resources, turns the grant into a VirtualNode and has
// a virtual kubelet serve it.
package peering
