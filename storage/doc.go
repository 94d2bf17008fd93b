// Package storage is ferry's storage fabric: the provisioner of the virtual
// StorageClass "ferry" and the controller that keeps each volume it made in
// step with the data behind it.
//
// A claim of the virtual class waits for its first pod
// (WaitForFirstConsumer). When the scheduler has picked the pod's node, the
// claim is provisioned where that node runs pods:
//
//   - on a real node, a claim of the class the user asked for
//     (ferry.io/requested-storage-class) is made in the storage namespace,
//     pinned to that node, and the user's claim is bound to a volume with the
//     same backing source and node affinity;
//   - on a virtual node, the provider is asked for a claim in the twin
//     namespace (the provider's class serving the requested one), and the
//     user's claim is bound to a local volume labelled ferry.io/cluster-id
//     with node affinity to that provider's virtual nodes, so the scheduler's
//     VolumeBinding and DataGravity keep every later pod of the claim there.
//
// A cluster that cannot provision hands the claim back to the scheduler.
// Deleting the claim deletes what was made for it, per the class's reclaim
// policy. The storage fabric owns the provider's copy of such a claim;
// reflection leaves claims of the virtual class alone.
package storage
