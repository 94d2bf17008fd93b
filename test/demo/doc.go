// Package demo is ferry's playground (`make demo`): two local clusters on
// the test bed, ferry's components as local processes, a peering, an
// offloaded namespace and a sample app, left running until `make demo-down`.
//
// A daemon process owns the clusters and components (they die with it, by
// the parent-death signal, so a crashed demo leaves nothing running); the
// `up` command starts it detached, waits until it is ready, then peers,
// offloads and deploys as a user would, and prints where each pod runs.
// Everything it writes is in one state folder (.demo/ by default).
package demo
