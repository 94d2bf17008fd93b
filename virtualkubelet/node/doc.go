// Package node runs ferry's virtual kubelet node: it registers, in the local
// (consumer) cluster, the Node that stands for one peered provider cluster,
// as described by a ferry.io/v1alpha1 VirtualNode, and keeps it alive and
// truthful.
//
// Run builds on virtual-kubelet's node library: its NodeController registers
// the Node and renews a coordination/v1 Lease in kube-node-lease. On top of
// it, Run
//
//   - probes the provider API server's /readyz every HealthCheckPeriod and
//     reports the Node Ready=Unknown (reason ProviderUnreachable) after
//     FailureThreshold consecutive failures, Ready=True (ProviderReachable)
//     on the next success, so the node lifecycle controller's unreachable
//     taints and taint-based eviction apply; the pod offloading marks the
//     node's pods not Ready meanwhile, which that controller does only for
//     a node whose Lease it stops seeing renewed;
//   - watches its VirtualNode and carries changes of spec.resources,
//     spec.nodeShapes, spec.labels and spec.taints to the Node within
//     seconds;
//   - keeps the VirtualNode's status (nodeName, the VirtualKubeletRunning
//     and NodeReady conditions, observedGeneration) up to date.
//
// Every write follows a real change: at rest the process only renews its
// Lease, sends the library's periodic status heartbeat and probes the
// provider.
package node
