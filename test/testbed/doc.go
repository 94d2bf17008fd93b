// Package testbed starts real, independent Kubernetes clusters on 127.0.0.1
// for ferry's tests: each with its own etcd and kube-apiserver and, on
// request, kube-controller-manager, kube-scheduler, kwok simulating nodes
// of given shapes (kwok also makes their pods Running, as a kubelet would)
// and storage classes with a dynamic provisioner (package hostpath).
//
// Clusters start in parallel in a few seconds, hand back clients and
// kubeconfig files, and stop every process they started on Stop; if the test
// process dies first, the kernel kills them (parent-death signal).
//
// The binaries come from the binaries package (`make testbed`).
package testbed
