// Package offload is the harness behind `make bench-offload`: in one run on
// two test-bed clusters it creates N pods directly in the provider and N pods
// in an offloaded namespace of the consumer, times each pod from its create
// call to a watch seeing it Running and Ready, counts the API requests both
// API servers served, samples the virtual kubelet's memory, and prints the
// ratios against the direct run in one RESULT line.
//
// The virtual kubelet runs as a real process (its memory is measured); ferry's
// controller managers run in-process, ferryctl peers the clusters.
package offload
