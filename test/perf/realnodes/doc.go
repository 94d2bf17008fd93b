// Package realnodes is `make bench-real`: on the real-node bed of
// test/realbed (two clusters with one real node each, ferry installed from
// its images and peered), it measures in one run what offloading costs a
// pod whose containers really run: the time from create to Ready of pods
// offloaded from the consumer against pods created directly in the
// provider, created in alternation on the same node; the latency of HTTP
// requests from a consumer pod through a Service to offloaded pods against
// the same requests from a provider pod to the same pods; and TCP
// throughput from a consumer pod to an offloaded pod against a provider
// pod to the same pod. The clients are test/realbed/probe in a pod, so
// every figure is measured inside the pods.
package realnodes
