// Package reflection is the harness behind `make bench-reflection`: on two
// test-bed clusters (etcd and kube-apiserver only) it runs the virtual
// kubelet's reflection (virtualkubelet/reflection.Run) in-process, with
// client transports that count every request per cluster and verb and the
// watches open at each moment, and measures:
//
//   - how long 1000 ConfigMaps, 1000 Secrets and 200 Services created in 10
//     offloaded namespaces take to be all reflected onto the provider;
//   - the latency from a ConfigMap update to a watch of the provider seeing
//     the copy change (p50, p99);
//   - provider writes per reflected object and per update; and, after a
//     restart of the reflection with a 5s resync period, writes during its
//     first sync and during an idle period holding at least one full resync
//     (target: none);
//   - the watches open on each cluster with 1, 10 and 50 offloaded
//     namespaces, with the cluster-wide and the per-namespace remote scope.
//
// Each is measured with both remote scopes. NamespaceOffloadings are made
// Ready by writing their status (no ferry controller runs), and the provider
// credential is the provider's admin: the scopes are chosen explicitly, not
// probed. The benchmark prints RESULT lines and fails only when something
// is not reflected or not measured, never on a time.
package reflection
