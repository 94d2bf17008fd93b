// Package offloading runs, in the virtual kubelet, the pods the consumer's
// scheduler binds to the virtual node: each becomes a ShadowPod in the twin
// namespace of its namespace on the provider, and the real pod's status flows
// back onto the local pod.
//
// It keeps no state of its own: everything is rebuilt from the watches of
// the local pods bound to the node, of the consumer's NamespaceOffloadings,
// and of the provider's ShadowPods and pods carrying this consumer's origin
// label (one watch of each per twin namespace, or, in the cluster remote
// scope, one of each for the whole provider), so a virtual kubelet killed at any point and
// started again neither duplicates nor loses a pod. Every write is decided by
// comparing what is with what should be, so a resync writes nothing.
//
// virtual-kubelet's own PodController is not used: it force-deletes a
// terminating pod only after its whole grace period (ferry deletes it as soon
// as the remote pod is gone, as a kubelet does), keeps its knowledge of pods
// in memory, and writes statuses built from a snapshot of the whole pod.
package offloading
