// Package demo is ferry's playground (`make demo`): local clusters on the
// test bed (a consumer and one provider, or more with --providers), each
// with a real node, the providers with simulated ones too; ferry's
// components as local processes, its gateway and route agents as pods;
// peerings, an offloaded namespace and a sample app of real containers
// answering across the clusters, left running until `make demo-down`.
//
// A daemon process owns the clusters and components (they die with it, by
// the parent-death signal; what a crashed demo's real nodes leave, the
// next start of the test bed ends) and
// restarts a component that exits with the kubelet's crash-loop back-off
// (package crashloop), so a user can kill or break one and watch it come
// back; `status` shows them. The `up` command starts the daemon detached,
// waits until it is ready, then peers, offloads and deploys as a user
// would, and prints where each pod runs. Everything it writes is in one
// state folder (.demo/ by default, --dir): one demo per folder, up refuses
// while one runs there, and demos in other folders run beside it.
package demo
