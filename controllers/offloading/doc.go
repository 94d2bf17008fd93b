// Package offloading implements the controllers that extend a namespace to
// other clusters. On a consumer, the NamespaceOffloading controller asks the
// selected providers for twin namespaces, reports their answers, and drains
// them when they are no longer wanted. On a provider, the TwinNamespace
// controller answers those requests (the namespace and the consumer's
// RoleBinding in it), and the ShadowPod controller keeps one real pod per
// ShadowPod the consumer's virtual kubelet creates.
package offloading
