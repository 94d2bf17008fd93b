// Package demo is ferry's playground (`make demo`): local clusters on the
// test bed (a consumer and one provider, or more with --providers), ferry's
// components as local processes, peerings, an offloaded namespace and a
// sample app, left running until `make demo-down`.
//
// A daemon process owns the clusters and components (they die with it, by
// the parent-death signal, so a crashed demo leaves nothing running) and
// restarts a component that exits with the kubelet's crash-loop back-off
// (package crashloop), so a user can kill or break one and watch it come
// back; `status` shows them. The `up` command starts the daemon detached,
// waits until it is ready, then peers, offloads and deploys as a user
// would, and prints where each pod runs. Everything it writes is in one
// state folder (.demo/ by default, --dir): one demo per folder, up refuses
// while one runs there, and demos in other folders run beside it.
package demo
