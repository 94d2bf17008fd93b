// Package grant computes what a provider shares with a consumer: a
// percentage of the unrequested allocatable resources of its real nodes, or a
// fixed request capped by what is free, and a summary of the largest free
// node shapes. It is pure arithmetic on Nodes and Pods, exact to the milli-CPU
// and the byte, so the controllers that use it stay thin.
package grant
